import Foundation
import PushgateCore
import PushgateDispatch
import PushgateGateway
import PushgatePostgres
import PushgateUDP
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The `pushgate` command line as documented, against the in-process simulator (`--simulator`).
@Suite("pushgate command line", .serialized, .timeLimit(.minutes(2)))
struct CommandLineTests {
    /// Starts `pushgate -f --simulator` on a fresh database with `arguments` added.
    static func start(
        _ arguments: [String],
        in directory: TemporaryDirectory
    ) throws -> (SpawnedProcess, OutputCollector) {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: GatewayCrashTests.gatewayBinary)
        process.arguments =
            ["-f", "--simulator", "-d", directory.path("cli.db"), "-l", "127.0.0.1", "-g", "0", "-n", "0"] + arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHGATE_") }
        let output = OutputCollector()
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        pipe.fileHandleForReading.readChunksInBackground({ output.append($0) }, onEnd: { output.end() })
        try process.run()
        return (process, output)
    }

    @Test("`--http-port -1` (the documented form) turns the HTTP API off and the daemon starts")
    func httpPortMinusOne() async throws {
        let directory = try TemporaryDirectory()
        let (process, output) = try Self.start(["--http-port", "-1"], in: directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        try await eventually("the daemon is ready", timeout: .seconds(60)) {
            if !process.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
            return output.text.contains("pushgate ready")
        }
        #expect(!output.text.contains("Missing value"))
        kill(process.processIdentifier, SIGTERM)
        try await eventually("the daemon stopped", timeout: .seconds(30)) { !process.isRunning }
        #expect(process.terminationStatus == 0)
        #expect(!output.text.contains("HTTP API listening"), "the API is off: \(output.text)")
    }

    @Test("`--simulator` runs an FCM and a Web Push simulator beside the APNs one and gives the app an FCM route")
    func simulatorBringsFCM() async throws {
        let directory = try TemporaryDirectory()
        let (process, output) = try Self.start(["--http-port", "-1"], in: directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        try await eventually("the daemon is ready", timeout: .seconds(60)) {
            if !process.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
            return output.text.contains("pushgate ready")
        }
        #expect(output.text.contains("APNs, FCM and Web Push simulators running in-process"), "\(output.text)")
        #expect(output.text.contains("fcm.simulator=127.0.0.1:"), "\(output.text)")
        #expect(output.text.contains("webpush.simulator=https://127.0.0.1:"), "\(output.text)")
        // The app's FCM client points at the simulator with the throwaway account's project.
        #expect(output.text.contains("project pushgate-simulated-default"), "\(output.text)")
        #expect(!output.text.contains("BEGIN PRIVATE KEY"), "the throwaway key is never logged")
        kill(process.processIdentifier, SIGTERM)
        try await eventually("the daemon stopped", timeout: .seconds(30)) { !process.isRunning }
        #expect(process.terminationStatus == 0)
    }

    @Test(
        "`pushgate -f --simulator`: a group of one APNs, one FCM and one browser device registered over UDP reaches FCM and the browser too"
    )
    func simulatorDeliversToFCMAndWebPush() async throws {
        let directory = try TemporaryDirectory()
        let registrationPort = ExternalTools.freeUDPPort()
        var notificationPort = ExternalTools.freeUDPPort()
        while notificationPort == registrationPort { notificationPort = ExternalTools.freeUDPPort() }
        let (process, output) = try Self.start(
            ["--http-port", "-1", "-g", "\(registrationPort)", "-n", "\(notificationPort)"],
            in: directory
        )
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        try await eventually("the daemon is ready", timeout: .seconds(60)) {
            if !process.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
            return output.text.contains("pushgate ready")
        }
        let control = try #require(
            output.text.firstMatch(of: /fcm\.simulator\.control=127\.0\.0\.1:(\d+)/).flatMap { Int($0.1) },
            "\(output.text)"
        )
        let webPushControl = try #require(
            output.text.firstMatch(of: /webpush\.simulator\.control=127\.0\.0\.1:(\d+)/).flatMap { Int($0.1) },
            "\(output.text)"
        )
        // A browser subscribes, as a page would, at the Web Push simulator's control API.
        var subscribe = URLRequest(url: URL(string: "http://127.0.0.1:\(webPushControl)/subscriptions")!)
        subscribe.httpMethod = "POST"
        subscribe.httpBody = Data(#"{"origin": 0}"#.utf8)
        let (created, _) = try await URLSession.shared.data(for: subscribe)
        let browser = try #require(try JSONSerialization.jsonObject(with: created) as? [String: Any])
        let browserID = try #require(browser["id"] as? String)
        let subscription = try JSONSerialization.data(withJSONObject: try #require(browser["subscription"]))
        let fcmToken = "fcm-device-" + String(repeating: "a1B2", count: 40)
        let registration = try UDPSender(port: registrationPort)
        registration.send(#"{"device": "\#(String(repeating: "ab", count: 32))", "group": "Mixed"}"#)
        registration.send(#"{"device": "\#(fcmToken)", "platform": "fcm", "group": "Mixed"}"#)
        registration.send(
            #"{"platform": "webpush", "group": "Mixed", "subscription": \#(String(decoding: subscription, as: UTF8.self))}"#
        )
        let notification = try UDPSender(port: notificationPort)
        let polls = Mutex(0)
        try await eventually("the FCM and Web Push simulators recorded the message", timeout: .seconds(60)) {
            // The request may overtake the registrations (two sockets): sent again every 50 polls until both have it.
            let poll = polls.withLock { count in
                defer { count += 1 }
                return count
            }
            if poll % 50 == 0 {
                notification.send(#"{"groups": ["Mixed"], "type": "urgent", "payload": {"aps": {"alert": "Hello"}}}"#)
            }
            let (data, _) = try await URLSession.shared.data(
                from: URL(string: "http://127.0.0.1:\(control)/messages?token=\(fcmToken)")!
            )
            let messages = (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?["messages"] as? [Any]
            let (received, _) = try await URLSession.shared.data(
                from: URL(string: "http://127.0.0.1:\(webPushControl)/messages?subscription=\(browserID)")!
            )
            let browserMessages =
                (try? JSONSerialization.jsonObject(with: received) as? [String: Any])?["messages"] as? [Any]
            return !(messages ?? []).isEmpty && !(browserMessages ?? []).isEmpty
        }
        kill(process.processIdentifier, SIGTERM)
        try await eventually("the daemon stopped", timeout: .seconds(30)) { !process.isRunning }
        #expect(process.terminationStatus == 0)
        #expect(!output.text.contains(fcmToken), "full FCM tokens are never logged")
        let endpoint = try #require((browser["subscription"] as? [String: Any])?["endpoint"] as? String)
        #expect(!output.text.contains(endpoint), "endpoints are never logged whole")
    }

    @Test("`--simulator` refuses the --fcm-* flags: it brings its own FCM and service account")
    func simulatorRefusesFCMFlags() async throws {
        let directory = try TemporaryDirectory()
        let (process, output) = try Self.start(["--http-port", "-1", "--fcm-host", "127.0.0.1:1"], in: directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        // Its last lines may still be in the pipe when it has exited: read to the end first.
        try await eventually("the daemon exited and its output was read", timeout: .seconds(60)) {
            !process.isRunning && output.isComplete
        }
        #expect(process.terminationStatus != 0)
        #expect(output.text.contains("drop the --fcm-* flags"), "\(output.text)")
    }

    @Test("a lease shorter than the request timeout is refused at start-up with exit 78 and a line naming both")
    func leaseShorterThanRequestTimeout() async throws {
        let directory = try TemporaryDirectory()
        let (process, output) = try Self.start(["--http-port", "-1", "--lease", "5"], in: directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        // Its last lines may still be in the pipe when it has exited: read to the end first.
        try await eventually("the daemon exited and its output was read", timeout: .seconds(60)) {
            !process.isRunning && output.isComplete
        }
        #expect(process.terminationStatus == 78)
        #expect(output.text.contains("lease"), "\(output.text)")
        #expect(output.text.contains("request timeout"), "\(output.text)")
    }
}

/// What `main` sets goes through `Gateway.Configuration`.
@Suite("One composition")
struct CompositionTests {
    @Test("a PostgreSQL store brings its chunk size and lease through Gateway.Configuration.use(_:)")
    func storeDefaultsLiveInTheConfiguration() throws {
        var configuration = Gateway.Configuration(
            databasePath: "a.db",
            udp: UDPIngress.Configuration(),
            apps: [],
            dispatcher: Dispatcher.Configuration(instanceID: InstanceID("composition"))
        )
        configuration.use(.postgres(try PostgresStore.Configuration(url: "postgres://u@127.0.0.1:5432/db")))
        #expect(configuration.dispatcher.chunkSize == PostgresStore.defaultChunkSize)
        #expect(configuration.dispatcher.leaseDuration == PostgresStore.defaultLeaseDuration)
        configuration.use(.sqlite(path: "b.db"))
        #expect(configuration.databasePath == "b.db")
    }
}
