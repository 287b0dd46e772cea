import Foundation
import NIOCore
import PushgateCore
import PushgateUDP
import Testing

@Suite("Registration datagram")
struct RegistrationDatagramTests {
    static let token = "be6406fe9e686c11f999c9d47e33b41be56be48f0c77570423bb89f5b51cf127"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    private func parse(_ text: String) throws(ValidationError) -> RegistrationCommand {
        try RegistrationDatagram.parse(Array(text.utf8), receivedAt: Self.now)
    }

    @Test("the C pushd README's registration registers the device in the default app")
    func readmeExample() throws {
        let command = try parse(#"{"device": "\#(Self.token)", "group": "Choom"}"#)
        #expect(
            command
                == .register(
                    Registration(
                        app: Registration.defaultApp,
                        token: try DeviceToken(hex: Self.token),
                        group: "Choom",
                        at: Self.now
                    )
                )
        )
    }

    @Test("parses from a ByteBuffer, with a trailing newline as nc sends it")
    func byteBuffer() throws {
        let buffer = ByteBuffer(string: #"{"device": "\#(Self.token)", "group": "Choom"}"# + "\n")
        let command = try RegistrationDatagram.parse(buffer, receivedAt: Self.now)
        #expect(command.group == "Choom")
        #expect(command.token.hex == Self.token)
    }

    @Test("extensions: app, remove, upper-case tokens normalised, unicode group names")
    func extensions() throws {
        let upper = Self.token.uppercased()
        let command = try parse(#"{"group": "caf\u00e9 ☕", "app": "shop", "device": "\#(upper)", "remove": false}"#)
        #expect(
            command
                == .register(
                    Registration(app: "shop", token: try DeviceToken(hex: Self.token), group: "café ☕", at: Self.now)
                )
        )
        let removal = try parse(#"{"device": "\#(Self.token)", "group": "Choom", "remove": true}"#)
        #expect(removal == .unassign(app: "default", token: try DeviceToken(hex: Self.token), group: "Choom"))
        #expect(removal.app == "default" && removal.group == "Choom")
        let longest = String(repeating: "g", count: 255)
        #expect(try parse(#"{"device": "\#(Self.token)", "group": "\#(longest)"}"#).group == longest)
    }

    @Test(
        "rejects the whole datagram, naming the field and the problem",
        arguments: [
            ("", ValidationError.Code.malformedJSON, "datagram"),
            ("{\"device\": \"\(token)\", \"group\": \"Choom\"", .malformedJSON, "datagram"),
            ("{\"device\": \"\(token)\", \"group\": \"Choom\"} trailing", .malformedJSON, "datagram"),
            ("{\"device\": \"\(token)\", \"group\": \"Cho\nom\"}", .malformedJSON, "group"),
            ("[\"\(token)\", \"Choom\"]", .notAnObject, "datagram"),
            ("\"\(token)\"", .notAnObject, "datagram"),
            ("{\"device\": \"\(token)\", \"group\": \"a\", \"group\": \"b\"}", .duplicateKey, "group"),
            ("{\"device\": \"\(token)\", \"group\": \"Choom\", \"bogus\": 1}", .unknownKey, "bogus"),
            ("{\"device\": \"\(token)\", \"groups\": [\"Choom\"]}", .unknownKey, "groups"),
            ("{\"group\": \"Choom\"}", .missingField, "device"),
            ("{\"device\": \"\(token)\"}", .missingField, "group"),
            ("{\"device\": 12, \"group\": \"Choom\"}", .wrongType, "device"),
            ("{\"device\": [\"\(token)\"], \"group\": \"Choom\"}", .wrongType, "device"),
            ("{\"device\": \"\(token)\", \"group\": null}", .wrongType, "group"),
            ("{\"device\": \"\(token)\", \"group\": \"Choom\", \"remove\": 1}", .wrongType, "remove"),
            ("{\"device\": \"\(token)\", \"group\": \"Choom\", \"remove\": \"true\"}", .wrongType, "remove"),
            ("{\"device\": \"\(token)\", \"group\": \"Choom\", \"app\": 1}", .wrongType, "app"),
            ("{\"device\": \"not-hex-and-short\", \"group\": \"Choom\"}", .invalidToken, "device"),
            ("{\"device\": \"\", \"group\": \"Choom\"}", .invalidToken, "device"),
            ("{\"device\": \"abc\", \"group\": \"Choom\"}", .invalidToken, "device"),
            ("{\"device\": \"\(String(repeating: "ab", count: 550))\", \"group\": \"Choom\"}", .invalidToken, "device"),
            ("{\"device\": \"\(token)\", \"group\": \"\"}", .invalidGroup, "group"),
            (
                "{\"device\": \"\(token)\", \"group\": \"\(String(repeating: "g", count: 256))\"}", .invalidGroup,
                "group"
            ),
            ("{\"device\": \"\(token)\", \"group\": \"tab\\there\"}", .invalidGroup, "group"),
            ("{\"device\": \"\(token)\", \"group\": \"nul\\u0000\"}", .invalidGroup, "group"),
            ("{\"device\": \"\(token)\", \"group\": \"c1\\u0085\"}", .invalidGroup, "group"),
            ("{\"device\": \"\(token)\", \"group\": \"Choom\", \"app\": \"\"}", .invalidApp, "app"),
        ] as [(String, ValidationError.Code, String)]
    )
    func rejections(datagram: String, code: ValidationError.Code, field: String) {
        do {
            let command = try parse(datagram)
            Issue.record("accepted \(datagram.debugDescription) as \(command)")
        } catch {
            #expect(error.code == code, "\(datagram.debugDescription): \(error)")
            #expect(error.field == field, "\(datagram.debugDescription): \(error)")
            #expect(!error.message.isEmpty)
        }
    }

    @Test("a rejection never echoes the token")
    func messagesDoNotEchoTokens() {
        do {
            _ = try parse(#"{"device": "\#(Self.token)zz", "group": "Choom"}"#)
            Issue.record("accepted a bad token")
        } catch {
            #expect(!error.description.contains(Self.token))
        }
    }
}
