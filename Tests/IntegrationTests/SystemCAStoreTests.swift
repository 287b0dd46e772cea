import Crypto
import Foundation
import PushgateCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// An app that trusts the system's CA store (no `ca` of its own) on a machine without one (Debian without
/// the ca-certificates package): the start stops with exit 78 and a line that says what is missing and how
/// to fix it, instead of the TLS library's "unknownError([])". The store is hidden in a mount namespace of
/// the test's own (a tmpfs over /etc/ssl), so the machine's is untouched.
@Suite("pushgate start without a system CA store: a clear configuration error")
struct SystemCAStoreTests {
    static let unshare = ExternalTools.path(of: "unshare")
    static var canHideStore: Bool {
        guard getuid() == 0, let unshare, FileManager.default.isExecutableFile(atPath: GatewayCrashTests.gatewayBinary)
        else { return false }
        return (try? ExternalTools.run(unshare, ["-m", "sh", "-c", "mount -t tmpfs tmpfs /etc/ssl"]).status) == 0
    }

    @Test(
        "an app without its own CA, no /etc/ssl/certs: exit 78 naming the ca-certificates package and app.NAME.ca",
        .enabled(if: canHideStore, "needs root, unshare and the pushgate binary to hide /etc/ssl in a mount namespace")
    )
    func missingStore() async throws {
        let directory = try TemporaryDirectory()
        let keyPath = directory.path("AuthKey.p8")
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
        let pidFile = directory.path("ca.pid")
        let app = [
            "--http-port", "-1", "--apns-host", "127.0.0.1:9", "--auth-key", keyPath, "--key-id", "ABC123DEFG",
            "--team-id", "DEF123GHIJ", "--topic", "com.example.app", "-o", directory.path("ca.log"),
        ]
        let gateway = [GatewayCrashTests.gatewayBinary, "-d", directory.path("hidden.db"), "-l", "127.0.0.1"]
        // Detached: the starting command exits with the daemon's start-up result (78 and its line, or 0 once
        // it is ready), so neither run needs a timer.
        let hidden = try await ExternalTools.runOffPool(
            Self.unshare!,
            ["-m", "sh", "-c", #"mount -t tmpfs tmpfs /etc/ssl && exec "$@""#, "sh"]
                + gateway + ["-g", "0", "-n", "0"] + app
        )
        #expect(hidden.status == 78, "\(hidden.output)")
        #expect(hidden.output.contains("ca-certificates"), "\(hidden.output)")
        #expect(hidden.output.contains("app.NAME.ca"), "\(hidden.output)")
        #expect(!hidden.output.contains("unknownError"), "\(hidden.output)")

        // The control: the same app with the store in place gets past the TLS set-up to "ready".
        let control = try await DetachedStartTests.start(app + ["--pid-file", pidFile], in: directory)
        #expect(control.status == 0, "\(control.standardError)")
        if let pid = pid_t(
            (try? String(contentsOfFile: pidFile, encoding: .utf8))?.trimmingCharacters(in: .newlines) ?? ""
        ) {
            kill(pid, SIGTERM)
            try await eventually("the control daemon stopped", timeout: .seconds(60)) {
                !DetachedStartTests.isAlive(pid)
            }
        }
    }
}
