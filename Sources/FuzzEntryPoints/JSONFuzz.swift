import Foundation
import PushgateCore
import PushgateUDP

/// The strict JSON reader and the datagram rules, on the same bytes:
/// - a parsed value, written back, parses to the same content, and writing that again gives the same text;
/// - a datagram the rules accept was valid JSON, its request is well formed (targets, unique groups and
///   devices, the payload a slice of the input that is itself a JSON object), and the request written
///   back as a datagram reads the same;
/// - a datagram that is not JSON is refused as such (malformed, too deep, duplicate key), never later.
enum JSONFuzz {
    private static let target = FuzzTarget.json
    static let receivedAt = Date(timeIntervalSince1970: 1_700_000_000)
    static let id = try! RequestID("fuzz-request")

    static func run(_ input: UnsafeRawBufferPointer) throws(FuzzViolation) {
        let parsed: JSONValue?
        do {
            parsed = try StrictJSONParser.parse(input)
        } catch {
            parsed = nil
        }
        if let parsed { try roundTrip(parsed) }
        let bytes = [UInt8](input)
        try notification(bytes, parsed: parsed)
        try registration(bytes, parsed: parsed)
    }

    private static func roundTrip(_ value: JSONValue) throws(FuzzViolation) {
        let text = JSONWriter.write(value)
        let again: JSONValue
        do {
            again = try StrictJSONParser.parse(text)
        } catch {
            throw FuzzViolation(target: target, message: "written back, the value no longer parses: \(error.message)")
        }
        try expect(again.sameContent(as: value), target, "written back, the value parses to other content")
        try expect(JSONWriter.write(again) == text, target, "writing is not stable")
    }

    /// A refusal of bytes the strict reader refused must say the JSON is at fault.
    static func checkRefusal(_ error: ValidationError, parsed: JSONValue?, _ what: String) throws(FuzzViolation) {
        let jsonCodes: Set<ValidationError.Code> = [.malformedJSON, .nestingTooDeep, .duplicateKey]
        switch parsed {
        case nil:
            try expect(jsonCodes.contains(error.code), target, "\(what) not JSON refused as \(error.code)")
        case .object?:
            try expect(!jsonCodes.contains(error.code), target, "\(what) JSON object refused as \(error.code)")
        case _?:
            try expect(error.code == .notAnObject, target, "\(what) non-object refused as \(error.code)")
        }
    }

    private static func notification(_ bytes: [UInt8], parsed: JSONValue?) throws(FuzzViolation) {
        let request: NotificationRequest
        do {
            request = try NotificationDatagram.parse(bytes, id: id, receivedAt: receivedAt)
        } catch {
            return try checkRefusal(error, parsed: parsed, "notification datagram:")
        }
        try checkWellFormed(request, input: bytes, parsed: parsed)
        let written = datagram(of: request)
        let again: NotificationRequest
        do {
            again = try NotificationDatagram.parse(written, id: id, receivedAt: receivedAt)
        } catch {
            throw FuzzViolation(target: target, message: "notification written back is refused: \(error)")
        }
        try expect(again == request, target, "notification written back reads differently")
    }

    /// What every accepted notification request holds, whichever ingress read it.
    static func checkWellFormed(
        _ request: NotificationRequest,
        input: [UInt8],
        parsed: JSONValue?
    ) throws(FuzzViolation) {
        guard case .object? = parsed else {
            throw FuzzViolation(target: target, message: "a request was accepted from bytes that are not a JSON object")
        }
        try expect(!request.groups.isEmpty || !request.devices.isEmpty, target, "a request without targets")
        try expect(Set(request.groups).count == request.groups.count, target, "repeated groups")
        try expect(Set(request.devices).count == request.devices.count, target, "repeated devices")
        try expect(request.pushType.allows(request.priority), target, "a priority the push type forbids")
        let payload = request.payload.bytes
        try expect(contains(input, payload), target, "the payload is not the bytes the sender wrote")
        let payloadValue: JSONValue
        do {
            payloadValue = try StrictJSONParser.parse(payload)
        } catch {
            throw FuzzViolation(target: target, message: "the payload is not JSON: \(error.message)")
        }
        guard case .object = payloadValue else {
            throw FuzzViolation(target: target, message: "the payload is not a JSON object")
        }
    }

    /// The request as a datagram naming every field explicitly (push type and priority, not `type`).
    static func datagram(of request: NotificationRequest) -> [UInt8] {
        var members: [(String, (inout [UInt8]) -> Void)] = [
            ("app", { JSONWriter.writeString(request.app, into: &$0) }),
            ("push_type", { JSONWriter.writeString(request.pushType.rawValue, into: &$0) }),
            ("priority", { $0 += Array(String(request.priority.rawValue).utf8) }),
            ("payload", { $0 += request.payload.bytes }),
        ]
        if !request.groups.isEmpty {
            members.append(("groups", { JSONWriter.writeStrings(request.groups, into: &$0) }))
        }
        if !request.devices.isEmpty {
            members.append(("devices", { JSONWriter.writeStrings(request.devices.map(\.value), into: &$0) }))
        }
        if case .at(let seconds) = request.expiration {
            members.append(("expiration", { $0 += Array(String(seconds).utf8) }))
        }
        if let key = request.collapseID { members.append(("key", { JSONWriter.writeString(key.value, into: &$0) })) }
        var out: [UInt8] = []
        JSONWriter.writeObject(members, into: &out)
        return out
    }

    private static func registration(_ bytes: [UInt8], parsed: JSONValue?) throws(FuzzViolation) {
        let command: RegistrationCommand
        do {
            command = try RegistrationDatagram.parse(bytes, receivedAt: receivedAt)
        } catch {
            return try checkRefusal(error, parsed: parsed, "registration datagram:")
        }
        guard case .object? = parsed else {
            throw FuzzViolation(target: target, message: "a registration accepted from bytes that are not an object")
        }
        var removes = false
        if case .unassign = command { removes = true }
        var written: [UInt8] = []
        JSONWriter.writeObject(
            [
                ("app", { JSONWriter.writeString(command.app, into: &$0) }),
                ("device", { JSONWriter.writeString(command.token.value, into: &$0) }),
                ("group", { JSONWriter.writeString(command.group, into: &$0) }),
                ("remove", { $0 += Array((removes ? "true" : "false").utf8) }),
            ],
            into: &written
        )
        let again: RegistrationCommand
        do {
            again = try RegistrationDatagram.parse(written, receivedAt: receivedAt)
        } catch {
            throw FuzzViolation(target: target, message: "registration written back is refused: \(error)")
        }
        try expect(again == command, target, "registration written back reads differently")
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        if needle.isEmpty { return true }
        for start in 0...(haystack.count - needle.count)
        where haystack[start..<start + needle.count].elementsEqual(needle) {
            return true
        }
        return false
    }
}
