import Foundation
import PushgateConfig
import PushgateCore
import Testing

@Suite("API keys from the configuration")
struct APIKeyLoadingTests {
    @Test("a key file gives one hashed key per line, skipping blank lines and comments; hashes are taken as given")
    func fileAndHash() throws {
        let folder = try ConfigFolder()
        let path = try folder.write("keys", "# backend\nfirst-key-0123456789\n\n  second-key-0123456789  \n")
        var configuration = GatewayConfiguration()
        configuration.apps = [.init(name: "news", authentication: .certificate(file: "c", key: nil))]
        configuration.apiKeys = [
            .init(name: "file", source: .file(path)),
            .init(name: "hash", source: .hash("sha256:" + String(repeating: "01", count: 32)), app: "news"),
        ]
        let keys = try configuration.loadAPIKeys()
        #expect(keys.count == 3)
        // printf %s first-key-0123456789 | sha256sum
        #expect(keys[0].sha256 == Self.sha256Hex("first-key-0123456789"))
        #expect(keys[1].sha256 == Self.sha256Hex("second-key-0123456789"), "surrounding spaces are not part of the key")
        #expect(keys[2] == LoadedAPIKey(sha256: Array(repeating: 1, count: 32), app: "news"))
    }

    @Test("an unreadable file, an empty one and a short key stop start-up, never quoting a key")
    func badFiles() throws {
        let folder = try ConfigFolder()
        var configuration = GatewayConfiguration()
        configuration.flagNames["apiKey.cli.file"] = "--api-key-file"
        configuration.apiKeys = [.init(name: "cli", source: .file("/nonexistent/keys"))]
        #expect(throws: ConfigurationProblem(key: "--api-key-file", "cannot read /nonexistent/keys")) {
            try configuration.loadAPIKeys()
        }

        let empty = try folder.write("empty", "# nothing\n\n")
        configuration.apiKeys = [.init(name: "cli", source: .file(empty))]
        #expect(throws: ConfigurationProblem(key: "--api-key-file", "\(empty) holds no key (one per line)")) {
            try configuration.loadAPIKeys()
        }

        let short = try folder.write("short", "long-enough-key-0000\nshort-secret\n")
        configuration.apiKeys = [.init(name: "cli", source: .file(short))]
        do {
            _ = try configuration.loadAPIKeys()
            Issue.record("a short key was accepted")
        } catch {
            #expect(error.description == "--api-key-file: \(short) line 2: a key must be at least 16 characters")
            #expect(!error.description.contains("short-secret"))
        }
    }

    static func sha256Hex(_ text: String) -> [UInt8] {
        // Computed by the tool everyone has, not by the code under test.
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try! process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try! input.fileHandleForWriting.close()
        let hex = String(decoding: output.fileHandleForReading.readToEndRetryingInterrupts(), as: UTF8.self).prefix(64)
        process.waitUntilExit()
        return GatewayConfiguration.parseSHA256("sha256:" + hex)!
    }
}
