import Foundation
import Testing
import WebPush

@testable import pushgate

@Suite("pushgate webpush generate-vapid-key, and simulate's Web Push flags")
struct WebPushCommandTests {
    private func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("vapid-\(UUID().uuidString).pem").path
    }

    @Test("--out writes a P-256 PEM key readable by its owner only")
    func writesKey() throws {
        let path = temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try GenerateVAPIDKeyCommand.parse(["--out", path]).run()
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let key = try VAPIDKey(contentsOfFile: path)
        #expect(key.publicKeyBase64URL.count == 87)  // 65 bytes, base64url unpadded
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasPrefix("-----BEGIN PRIVATE KEY-----"))
    }

    @Test("an existing file is never replaced: the command fails naming it and the file is unchanged")
    func refusesExisting() throws {
        let path = temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "keep me".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: (any Error).self) { try GenerateVAPIDKeyCommand.parse(["--out", path]).run() }
        do {
            try GenerateVAPIDKeyCommand.parse(["--out", path]).run()
        } catch {
            #expect("\(error)".contains(path) && "\(error)".contains("never replaced"))
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "keep me")
    }

    @Test("simulate: Web Push is off by default; --webpush-port makes an h2 origin and an HTTP/1.1-only one")
    func simulateFlags() throws {
        #expect(try SimulateCommand.parse([]).webPushConfiguration() == nil)
        let two = try #require(try SimulateCommand.parse(["--webpush-port", "0"]).webPushConfiguration())
        #expect(two.origins == [.init(port: 0, offersHTTP2: true), .init(port: 0, offersHTTP2: false)])
        let one = try #require(
            try SimulateCommand.parse(["--webpush-port", "2201", "--webpush-http1-port=-1"]).webPushConfiguration()
        )
        #expect(one.origins == [.init(port: 2201, offersHTTP2: true)])
        #expect(throws: (any Error).self) { try SimulateCommand.parse(["--webpush-port", "70000"]) }
    }
}
