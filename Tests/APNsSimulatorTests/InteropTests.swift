import APNsSimulator
import Foundation
import Testing

/// Other HTTP/2 implementations against the simulator. The tools are installed in CI; without
/// them these tests are skipped.
@Suite("Interop")
struct InteropTests {
    @Test(.enabled(if: executableExists("/usr/bin/curl"), "needs /usr/bin/curl"))
    func curlWithAClientCertificateIsAnswered() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let authority = try SimulatorCertificateAuthority()
        let client = try authority.issueClientCertificate(topic: bundleID)
        let certificatePath = directory.appendingPathComponent("client.pem").path
        let keyPath = directory.appendingPathComponent("client-key.pem").path
        try client.write(certificateTo: certificatePath, privateKeyTo: keyPath)

        var configuration = APNsSimulator.Configuration()
        configuration.tls = .authority(authority)
        configuration.clientCertificateAuthorityPEM = authority.certificatePEM
        configuration.caCertificateOutputPath = directory.appendingPathComponent("ca.pem").path
        try await APNsSimulator.withRunning(configuration) { simulator in
            let caPath = try #require(simulator.caCertificatePath)
            func curl(topic: String) async throws -> (status: String, output: String) {
                let result = try await run(
                    "/usr/bin/curl",
                    [
                        "-s", "--http2", "--cacert", caPath, "--cert", certificatePath, "--key", keyPath,
                        "-H", "apns-topic: \(topic)", "-H", "apns-push-type: alert",
                        "-H", "apns-id: 123e4567-e89b-12d3-a456-426655440000",
                        "--data-binary", #"{"aps":{"alert":"from curl"}}"#,
                        "-D", "-", "-o", "-",
                        "https://localhost:\(simulator.port)/3/device/\(deviceToken())",
                    ]
                )
                let statusLine =
                    result.stdout.split(separator: "\r\n").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
                return (statusLine, result.stdout)
            }
            let accepted = try await curl(topic: bundleID)
            #expect(accepted.status == "HTTP/2 200", "\(accepted.output)")
            #expect(accepted.output.lowercased().contains("apns-id: 123e4567-e89b-12d3-a456-426655440000"))
            let refused = try await curl(topic: "com.someone.else")
            #expect(refused.status == "HTTP/2 400")
            #expect(refused.output.hasSuffix(#"{"reason":"TopicDisallowed"}"#))
            #expect(simulator.notifications().first?.payloadString == #"{"aps":{"alert":"from curl"}}"#)

            // Without the client certificate the TLS handshake fails.
            let refusedTLS = try await run(
                "/usr/bin/curl",
                [
                    "-s", "--http2", "--cacert", caPath, "-o", "/dev/null", "-w", "%{http_code}",
                    "--data-binary", "{}", "https://127.0.0.1:\(simulator.port)/3/device/\(deviceToken())",
                ]
            )
            #expect(refusedTLS.status != 0)
        }
    }

    @Test(.enabled(if: executableExists("/usr/bin/curl"), "needs /usr/bin/curl"))
    func curlVerifiesTheGeneratedServerCertificateForLocalhostAndLoopbackAddresses() async throws {
        try await APNsSimulator.withRunning { simulator in
            let caPath = try #require(simulator.caCertificatePath)
            #expect(try String(contentsOfFile: caPath, encoding: .utf8) == simulator.caCertificatePEM)
            for host in ["localhost", "127.0.0.1"] {
                let result = try await run(
                    "/usr/bin/curl",
                    [
                        "-s", "--http2", "--cacert", caPath, "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                        "-H", "apns-topic: \(bundleID)", "--data-binary", #"{"aps":{}}"#,
                        "https://\(host):\(simulator.port)/3/device/\(deviceToken())",
                    ]
                )
                #expect(result.stdout == "200 2", "\(host): \(result.stderr)")
            }
        }
    }

    /// Prints h2load's throughput: a benchmark-able figure, not a pass/fail threshold.
    @Test(.enabled(if: executableExists("/usr/bin/h2load"), "needs h2load (Debian package nghttp2-client)"))
    func h2loadPushesThroughTheSimulator() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let payloadPath = directory.appendingPathComponent("payload.json").path
        try Data(#"{"aps":{"alert":"load"}}"#.utf8).write(to: URL(fileURLWithPath: payloadPath))
        var configuration = APNsSimulator.Configuration()
        configuration.recordLimit = 100
        try await APNsSimulator.withRunning(configuration) { simulator in
            let requests = 2000
            let result = try await run(
                "/usr/bin/h2load",
                [
                    "-n", "\(requests)", "-c", "2", "-m", "50",
                    "--header", "apns-topic: \(bundleID)", "--header", "apns-push-type: alert",
                    "-d", payloadPath,
                    "https://127.0.0.1:\(simulator.port)/3/device/\(deviceToken())",
                ]
            )
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("\(requests) succeeded"), "\(result.stdout)")
            #expect(result.stdout.contains("status codes: \(requests) 2xx"), "\(result.stdout)")
            #expect(result.stdout.contains("Application protocol: h2"))
            let stats = simulator.stats()
            #expect(stats.accepted == requests)
            #expect(stats.recorded == 100)
            #expect(stats.connectionsOpened == 2)
            let throughput = result.stdout.split(separator: "\n").first { $0.hasPrefix("finished in") } ?? "?"
            print(
                "h2load against the simulator (debug build unless tests run in release; -n \(requests) -c 2 -m 50): "
                    + String(throughput)
            )
        }
    }
}

@Suite("Lifecycle")
struct LifecycleTests {
    @Test func asAServiceItRunsUntilCancelledAndThenReleasesItsPort() async throws {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let service = APNsSimulator(configuration: .init()) { running in
            continuation.yield(running.port)
        }
        let task = Task { try await service.run() }
        var iterator = ports.makeAsyncIterator()
        let port = try #require(await iterator.next())
        let probe = try await SimulatorProbe.connect(port: port, trustRootsPEM: nil)
        #expect(try await probe.send(.push(token: deviceToken(), headers: alertHeaders())).response?.status == 200)
        task.cancel()
        try await task.value
        try await probe.waitForClose()
        await #expect(throws: (any Error).self) {
            _ = try await SimulatorProbe.connect(port: port, trustRootsPEM: nil)
        }
    }

    @Test func invalidConfigurationIsRejectedNamingTheKey() async throws {
        var configuration = APNsSimulator.Configuration()
        configuration.eventLoopThreads = 0
        do {
            try await APNsSimulator.withRunning(configuration) { _ in }
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains("eventLoopThreads"))
        }
        configuration = .init()
        configuration.tls = .pem(certificateChain: "nope", privateKey: "nope")
        do {
            try await APNsSimulator.withRunning(configuration) { _ in }
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains("tls"))
        }
    }

    @Test func theTemporaryCAFileIsRemovedOnStop() async throws {
        let path = try await APNsSimulator.withRunning { simulator in
            let path = try #require(simulator.caCertificatePath)
            #expect(FileManager.default.fileExists(atPath: path))
            return path
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
