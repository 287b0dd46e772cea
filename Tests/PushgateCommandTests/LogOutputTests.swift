import Foundation
import Logging
import Testing

@testable import pushgate

@Suite("Log lines: text and JSON")
struct LogOutputTests {
    static func event(_ message: Logger.Message, metadata: Logger.Metadata? = nil) -> LogEvent {
        LogEvent(
            level: .warning,
            message: message,
            metadata: metadata,
            source: "PushgateUDP",
            file: #fileID,
            function: #function,
            line: #line
        )
    }

    @Test("a JSON line is one object with the fixed fields and every metadata key, whatever the text holds")
    func json() throws {
        let metadata: Logger.Metadata = [
            "udp.reason": "malformed_json", "udp.repeated": "12", "message": "a clash",
            "nested": .dictionary(["list": .array(["a", "b\"c"])]),
        ]
        let line = LogOutput.jsonLine("pushgate.udp", Self.event("bad \"datagram\"\n\u{1}\ttab"), metadata)
        #expect(line.hasSuffix("}\n"))
        #expect(line.filter { $0 == "\n" }.count == 1, "one line")
        let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["level"] as? String == "warning")
        #expect(object["label"] as? String == "pushgate.udp")
        #expect(object["message"] as? String == "bad \"datagram\"\n\u{1}\ttab")
        #expect(object["source"] as? String == "PushgateUDP")
        #expect(object["udp.reason"] as? String == "malformed_json")
        #expect(object["udp.repeated"] as? String == "12")
        #expect(object["metadata.message"] as? String == "a clash")
        #expect(((object["nested"] as? [String: Any])?["list"] as? [String]) == ["a", "b\"c"])
        let time = try #require(object["time"] as? String)
        #expect(try Date(time, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) <= Date())
    }

    @Test("a text line keeps its layout: time, level, label, sorted metadata, message")
    func text() {
        let line = LogOutput.textLine("pushgate", Self.event("pushgate ready"), ["b": "2", "a": "1"])
        #expect(line.hasSuffix(" warning pushgate: a=1 b=2 pushgate ready\n"))
    }

    @Test("reopen writes to the path again after the file was moved away, as logrotate does")
    func reopen() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-log-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("pushgate.log").path
        let file = try #require(LogFile(path: path))
        file.append("first\n")
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        file.append("second\n")
        #expect(file.reopen() == nil)
        file.append("third\n")
        #expect(try String(contentsOfFile: path + ".1", encoding: .utf8) == "first\nsecond\n")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "third\n")
        try FileManager.default.removeItem(at: folder)
        #expect(file.reopen() != nil, "a folder that is gone: the old file is kept, and the reason said")
        file.append("fourth\n")
    }
}
