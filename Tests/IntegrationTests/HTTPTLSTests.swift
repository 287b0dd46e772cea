import Foundation
import Logging
import PushgateConfig
import PushgateCore
import PushgateGateway
import PushgateHTTP
import Synchronization
import Testing

@testable import PushgateGateway

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP API over TLS, checked with programs nobody here wrote: curl and openssl's s_client.
@Suite("HTTP API over TLS: curl, mTLS, certificate reload", .serialized, .timeLimit(.minutes(3)))
struct HTTPTLSTests {
    static let toolsInstalled = ExternalTools.isInstalled("openssl") && ExternalTools.isInstalled("curl")

    /// The gateway as `pushgate` builds it, its API on 127.0.0.1 port 0 over TLS with `files`.
    static func withGateway(
        _ files: TLSTestFiles,
        clientCA: String? = nil,
        _ body: @escaping @Sendable (Gateway.Running, Int) async throws -> Void
    ) async throws {
        try await GatewayFixture.withSimulator { _, base in
            var configuration = base
            configuration.http.port = 0
            configuration.http.tls = .init(certificate: files.certificate, key: files.key, clientCA: clientCA)
            try await GatewayFixture.run(configuration) { running, _ in
                try await eventually("HTTP API listening") { running.httpPort() != nil }
                try await body(running, running.httpPort()!)
            }
        }
    }

    @Test("curl --cacert gets its answer over TLS; plain HTTP and TLS 1.1 get none", .enabled(if: toolsInstalled))
    func tlsWithCurl() async throws {
        let files = try TLSTestFiles.make()
        try await Self.withGateway(files) { _, port in
            let (status, output) = try await files.curl(port: port)
            #expect(status == 0, "\(output)")
            #expect(output.contains(#""status":"ok""#) || output.contains(#""status": "ok""#), "\(output)")
            #expect(try await files.servedSerial(port: port) == "1001")

            let plain = try await ExternalTools.runOffPool(
                "curl",
                ["-sS", "--max-time", "10", "http://127.0.0.1:\(port)/healthz"]
            )
            #expect(plain.status != 0 && !plain.output.contains("ok"), "no answer in clear text: \(plain.output)")
            let untrusted = try await ExternalTools.runOffPool(
                "curl",
                ["-sS", "--max-time", "10", "https://127.0.0.1:\(port)/healthz"]
            )
            #expect(untrusted.status != 0, "a client that does not trust the CA refuses the server")

            // The client is willing (security level 0 lets OpenSSL 3 offer TLS 1.1); the server is not.
            let old = try await ExternalTools.runOffPool(
                "sh",
                [
                    "-c",
                    "openssl s_client -connect 127.0.0.1:\(port) -tls1_1 -cipher DEFAULT:@SECLEVEL=0 </dev/null 2>&1",
                ]
            )
            #expect(!old.output.contains("BEGIN CERTIFICATE"), "no certificate over TLS 1.1: \(old.output)")
            #expect(old.output.contains("alert protocol version"), "the server refused the version: \(old.output)")
            #expect(!old.output.contains("no protocols available"), "the client did offer TLS 1.1: \(old.output)")
            let twelve = try await files.servedSerial(port: port, extraArguments: ["-tls1_2"])
            #expect(twelve == "1001", "TLS 1.2 is accepted")
        }
    }

    @Test("with http.tls.clientCA a client certificate from that CA is required", .enabled(if: toolsInstalled))
    func mutualTLS() async throws {
        let files = try TLSTestFiles.make()
        try await Self.withGateway(files, clientCA: files.clientCA) { _, port in
            let withCertificate = try await files.curl(
                port: port,
                ["--cert", files.clientCertificate, "--key", files.clientKey]
            )
            #expect(withCertificate.status == 0, "\(withCertificate.output)")
            #expect(withCertificate.output.contains("ok"))

            let without = try await files.curl(port: port)
            #expect(without.status != 0, "no client certificate, no answer: \(without.output)")
            #expect(!without.output.contains("ok"))

            let stranger = try await files.curl(
                port: port,
                ["--cert", files.strangerCertificate, "--key", files.strangerKey]
            )
            #expect(stranger.status != 0, "a certificate from another CA is refused: \(stranger.output)")
        }
    }

    @Test(
        "a reload serves renewed files to new connections; a bad file on reload keeps the old certificate",
        .enabled(if: toolsInstalled)
    )
    func reloadSwapsTheCertificate() async throws {
        let files = try TLSTestFiles.make()
        try await Self.withGateway(files) { running, port in
            #expect(try await files.servedSerial(port: port) == "1001")
            try files.install(serial: "2002")
            #expect(try await files.servedSerial(port: port) == "1001", "nothing changes before the reload")
            await running.reload()
            #expect(try await files.servedSerial(port: port) == "2002")

            // A broken renewal: the certificate file is not PEM.
            try files.replace(files.certificate, with: Data("not a certificate".utf8))
            await running.reload()
            #expect(try await files.servedSerial(port: port) == "2002", "the previous certificate stays")
            // Half a renewal: the old certificate with the new key.
            try files.replace(
                files.certificate,
                with: try Data(contentsOf: URL(fileURLWithPath: files.directory.path("server-1001.pem")))
            )
            await running.reload()
            #expect(try await files.servedSerial(port: port) == "2002", "a key that does not match keeps the old pair")
            #expect(try await files.curl(port: port).status == 0)

            try files.install(serial: "1001")
            await running.reload()
            #expect(try await files.servedSerial(port: port) == "1001")
        }
    }

    @Test("bad TLS files stop start-up naming the key", .enabled(if: toolsInstalled))
    func badFilesAtStartUp() throws {
        let files = try TLSTestFiles.make()
        func problem(_ tls: GatewayConfiguration.HTTP.TLS) -> ConfigurationProblem? {
            var configuration = GatewayConfiguration()
            configuration.http.port = 0
            configuration.http.tls = tls
            do {
                _ = try configuration.loadHTTPTLS(clock: SystemWallClock())
                return nil
            } catch {
                return error
            }
        }
        let notPEM = files.directory.path("garbage.pem")
        try Data("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n".utf8).write(
            to: URL(fileURLWithPath: notPEM)
        )
        let otherKey = files.directory.path("server-2002.key")
        let unreadable = files.directory.path("missing.pem")

        #expect(problem(.init(certificate: files.certificate, key: files.key)) == nil)
        #expect(problem(.init(certificate: unreadable, key: files.key))?.key == "http.tls.certificate")
        #expect(problem(.init(certificate: notPEM, key: files.key))?.key == "http.tls.certificate")
        #expect(problem(.init(certificate: files.certificate, key: unreadable))?.key == "http.tls.key")
        #expect(problem(.init(certificate: files.certificate, key: files.serverCA))?.key == "http.tls.key")
        let mismatch = problem(.init(certificate: files.certificate, key: otherKey))
        #expect(mismatch?.key == "http.tls.key")
        #expect(
            mismatch?.message.contains("does not belong to the certificate") == true,
            "\(String(describing: mismatch))"
        )
        #expect(
            problem(.init(certificate: files.certificate, key: files.key, clientCA: notPEM))?.key == "http.tls.clientCA"
        )
        let noKeyMaterial = [files.key, otherKey].map { try? String(contentsOfFile: $0, encoding: .utf8) }
        for line in [mismatch?.description ?? ""] {
            for key in noKeyMaterial.compactMap({ $0 }) {
                let body = key.split(separator: "\n").dropFirst().first.map(String.init) ?? "?"
                #expect(!line.contains(body), "a problem never quotes key material")
            }
        }
    }

    @Test("without TLS beyond loopback, start-up warns once that bearer keys travel in clear text")
    func clearTextWarning() throws {
        let lines = CapturedLog { "\($0.level) \($0.message)" }
        let logger = lines.logger("test")
        let hook = ReloadHook()
        Gateway.prepareTLS(of: HTTPAPI.Configuration(host: "192.0.2.10", port: 0), reloadHook: hook, logger: logger)
        Gateway.prepareTLS(of: HTTPAPI.Configuration(host: "127.0.0.1", port: 0), reloadHook: hook, logger: logger)
        Gateway.prepareTLS(of: HTTPAPI.Configuration(host: "::1", port: 0), reloadHook: hook, logger: logger)
        let logged = lines.lines
        #expect(logged.count == 1, "\(logged)")
        #expect(logged.first?.hasPrefix("warning") == true && logged.first?.contains("clear text") == true)
    }

    @Test(
        "the daemon: SIGHUP after replacing the files, and the next connection sees the new serial",
        .enabled(if: toolsInstalled)
    )
    func sighupInTheDaemon() async throws {
        let files = try TLSTestFiles.make()
        let directory = try TemporaryDirectory()
        let (process, output) = try CommandLineTests.start(
            ["--http-port", "0", "--http-tls-certificate", files.certificate, "--http-tls-key", files.key],
            in: directory
        )
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let port = Mutex<Int?>(nil)
        try await eventually("the HTTP API listens", timeout: .seconds(60)) {
            if !process.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
            guard let line = output.text.split(separator: "\n").first(where: { $0.contains("HTTP API listening") }),
                let range = line.range(of: #"http\.port=\d+"#, options: .regularExpression)
            else { return false }
            port.withLock { $0 = Int(line[range].dropFirst("http.port=".count)) }
            return true
        }
        let apiPort = try #require(port.withLock { $0 })
        #expect(try await files.servedSerial(port: apiPort) == "1001")
        #expect(try await files.curl(port: apiPort).status == 0)

        try files.install(serial: "2002")
        kill(process.processIdentifier, SIGHUP)
        try await eventually("the certificate was reloaded", timeout: .seconds(30)) {
            if !process.isRunning { throw ExternalTools.ToolError("pushgate exited on SIGHUP:\n\(output.text)") }
            return output.text.contains("HTTP API certificate reloaded")
        }
        #expect(try await files.servedSerial(port: apiPort) == "2002")

        try files.replace(files.key, with: Data("garbage".utf8))
        kill(process.processIdentifier, SIGHUP)
        // The daemon reloads its whole configuration, all or nothing: the line names the key at fault.
        try await eventually("the failed reload was logged", timeout: .seconds(30)) {
            output.text.contains("configuration not reloaded; everything stays as it was")
        }
        #expect(process.isRunning)
        #expect(try await files.servedSerial(port: apiPort) == "2002")
        #expect(output.text.contains("push.reload.key=http.tls.key"), "the line names the key")

        kill(process.processIdentifier, SIGTERM)
        try await eventually("the daemon stopped", timeout: .seconds(30)) { !process.isRunning }
        #expect(process.terminationStatus == 0)
    }

    @Test("the daemon: an unreadable certificate exits 78 with one line naming the key", .enabled(if: toolsInstalled))
    func daemonBadCertificate() async throws {
        let directory = try TemporaryDirectory()
        let (process, output) = try CommandLineTests.start(
            [
                "--http-port", "0", "--http-tls-certificate", directory.path("absent.pem"), "--http-tls-key",
                directory.path("absent.key"),
            ],
            in: directory
        )
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        try await eventually("pushgate exited", timeout: .seconds(60)) { !process.isRunning && output.isComplete }
        #expect(process.terminationStatus == 78)
        let lines = output.text.split(separator: "\n").filter { $0.hasPrefix("pushgate: ") }
        #expect(lines == ["pushgate: http.tls.certificate: \(directory.path("absent.pem")): cannot read the file"])
    }
}
