import APNsSimulator
import Crypto
import Foundation
import PushgateCore
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The release tarball's systemd unit where it will run: a Debian 12 root (debootstrap's minbase plus
/// systemd, as a fresh Debian machine has it) booted with `systemd-nspawn -b`, so that systemd is PID 1,
/// and docs/operations.md followed to the letter inside it: install, the `pushgate` user, the unit
/// (`systemd-analyze verify`, `systemctl enable --now`), the walkthrough against the APNs simulator on the
/// host's loopback (the container shares the host's network), `systemctl reload` with a changed API key
/// file, the journal rotated, the watchdog fed, `systemctl stop`, a configuration error that fails the start
/// without restarts, `systemd-analyze security`; then the logrotate snippet against a detached daemon, as
/// docs/operations.md says for running without the unit.
///
/// The commands come from docs/operations.md: each step run here must be a line of it, so the document and
/// what is tested cannot part. Skipped, saying why, without the tarball, root, systemd-nspawn, or a Debian
/// mirror for the first debootstrap; with PUSHGATE_RELEASE_TARBALL set, those fail it instead. A machine
/// where nspawn cannot boot a container (no cgroups for it, no privileges) cancels the test with
/// nspawn's own words: never a failure for that alone, never silent.
@Suite("The release tarball's unit under a booted systemd (Debian 12, systemd-nspawn)", .serialized)
struct SystemdUnitTests {
    static let keyID = "ABC123DEFG"
    static let teamID = "DEF123GHIJ"
    static let topic = "com.example.pushgate"
    static let firstKey = "backend-key-first-0123456789"
    static let secondKey = "backend-key-second-0123456789"

    /// The bootable root, made once and kept between runs (debootstrap takes about two minutes and ~250 MB);
    /// each run boots it under an overlay that the halt throws away. Beyond minbase: systemd as PID 1 (and
    /// its D-Bus), what INSTALL asks for (SQLite, the CA certificates), and logrotate, which every Debian
    /// install has. Not procps: the unit must not need /bin/kill.
    static let cachedRoot = "/var/cache/pushgate-tests/debian12-systemd"
    static let packages = "systemd,systemd-sysv,dbus,libsqlite3-0,ca-certificates,logrotate"

    /// Why the test cannot run here; nil when it can (whether nspawn boots is only known by trying).
    static let missing: String? = {
        if !FileManager.default.fileExists(atPath: ReleaseTarballTests.tarball.path) {
            return
                "no release tarball at \(ReleaseTarballTests.tarball.path): run scripts/release.sh (or set PUSHGATE_RELEASE_TARBALL)"
        }
        if geteuid() != 0 { return "systemd-nspawn needs root" }
        if !ExternalTools.isInstalled("systemd-nspawn") {
            return "systemd-nspawn is not installed (apt-get install systemd-container)"
        }
        if !ExternalTools.isInstalled("nsenter") { return "nsenter is not installed (util-linux)" }
        if !FileManager.default.fileExists(atPath: cachedRoot + "/.complete") {
            if !ExternalTools.isInstalled("debootstrap") {
                return "debootstrap is not installed (apt-get install debootstrap)"
            }
            if DebianMirror.configured() == nil {
                return "no Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list"
            }
        }
        return nil
    }()

    static let skipComment = Comment(rawValue: "systemd unit test skipped: \(missing ?? "")")

    /// docs/operations.md, read from the repository the test was built from.
    static var operationsDocument: String {
        get throws {
            let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            return try String(contentsOf: packageRoot.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        }
    }

    /// The steps, as docs/operations.md writes them (VERSION stands for the release's version).
    static let installSteps = [
        "apt-get install libsqlite3-0 ca-certificates",
        "tar xzf pushgate-VERSION-linux-x86_64.tar.gz",
        "cd pushgate-VERSION-linux-x86_64",
        "install -d /usr/local/lib/pushgate-VERSION",
        "cp -R bin/. /usr/local/lib/pushgate-VERSION/",
        "ln -sfn /usr/local/lib/pushgate-VERSION/pushgate /usr/local/bin/pushgate",
        "pushgate --version",
    ]
    static let userSteps = [
        "adduser --system --group --no-create-home pushgate",
        "install -d -m 0755 /etc/pushgate",
        "install -m 0640 -o root -g pushgate AuthKey_ABC123DEFG.p8 backend.keys /etc/pushgate/",
        "cp pushgate.yaml.example /etc/pushgate/pushgate.yaml",
    ]
    static let serviceSteps = [
        "install -m 0644 pushgate.service /etc/systemd/system/pushgate.service",
        "systemd-analyze verify /etc/systemd/system/pushgate.service",
        "systemctl daemon-reload",
        "systemctl enable --now pushgate",
        "systemctl status pushgate",
    ]
    /// The check of a configuration before the service runs, which ends at once (exit 78) on a bad one.
    static let checkStep = "pushgate -f --config /etc/pushgate/pushgate.yaml -d /tmp/pushgate-check.db"
    static let detachedSteps = [
        "install -d /var/log/pushgate /run/pushgate",
        "pushgate -o /var/log/pushgate/pushgate.log --pid-file /run/pushgate/pushgate.pid --config /etc/pushgate/pushgate.yaml",
        "cp pushgate.logrotate /etc/logrotate.d/pushgate",
        "logrotate --force /etc/logrotate.d/pushgate",
    ]

    @Test(
        "installed per docs/operations.md in a booted Debian 12: the unit starts (READY=1), delivers the walkthrough, reloads a changed API key, feeds the watchdog and stops cleanly; logrotate's snippet rotates a detached daemon's log",
        .enabled(
            if: SystemdUnitTests.missing == nil || ReleaseTarballTests.tarball.required,
            SystemdUnitTests.skipComment
        ),
        .timeLimit(.minutes(20))
    )
    func unitUnderBootedSystemd() async throws {
        if let missing = Self.missing {
            // Only reached when PUSHGATE_RELEASE_TARBALL asked for this test.
            Issue.record("PUSHGATE_RELEASE_TARBALL is set but the test cannot run: \(missing)")
            return
        }
        // Every step is a line of docs/operations.md, or the test would check something nobody reads.
        let document = try Self.operationsDocument
        let documented = Set(Self.commandLines(of: document))
        for step in Self.installSteps + Self.userSteps + Self.serviceSteps + [Self.checkStep] + Self.detachedSteps {
            #expect(documented.contains(step), "docs/operations.md no longer has the command `\(step)`")
        }

        let started = ContinuousClock.now
        try await DebianRoot.makeCachedRoot(Self.cachedRoot, packages: Self.packages)
        // What the test hands in (the tarball, credentials, configuration) is read-only at
        // /mnt/pushgate-test inside; written here, seen there at once (a bind mount).
        let exchange = try TemporaryDirectory()
        let key = P256.Signing.PrivateKey()
        try key.pemRepresentation.write(
            toFile: exchange.path("AuthKey_\(Self.keyID).p8"),
            atomically: true,
            encoding: .utf8
        )
        try "\(Self.firstKey)\n".write(toFile: exchange.path("backend.keys"), atomically: true, encoding: .utf8)
        let tarballName = URL(fileURLWithPath: ReleaseTarballTests.tarball.path).lastPathComponent
        try FileManager.default.copyItem(atPath: ReleaseTarballTests.tarball.path, toPath: exchange.path(tarballName))

        let container: BootedContainer
        switch try await BootedContainer.boot(Self.cachedRoot, exchange: exchange.url.path) {
        case .booted(let booted):
            container = booted
        case .cannotBoot(let why):
            print("systemd unit test cancelled: systemd-nspawn cannot boot a container here: \(why)")
            try Test.cancel("systemd-nspawn cannot boot a container here: \(why)")
        }
        defer { container.remove() }
        let booted = ContinuousClock.now

        var configuration = APNsSimulator.Configuration()
        configuration.tokenKeys = [ProviderTokenKey(keyID: Self.keyID, teamID: Self.teamID, publicKey: key.publicKey)]
        configuration.logger = TestLogger.make("simulator")
        try await APNsSimulator.withRunning(configuration) { simulator in
            try FileManager.default.copyItem(
                atPath: simulator.caCertificatePath!,
                toPath: exchange.path("simulator-ca.pem")
            )
            try Self.configuration(apnsPort: simulator.port).write(
                toFile: exchange.path("pushgate.yaml"),
                atomically: true,
                encoding: .utf8
            )
            try await Self.installAndStart(in: container, tarball: tarballName)
            try await Self.walkthroughAndReload(in: container, simulator: simulator)
            try await Self.stop(in: container)
            try await Self.logrotateDetached(in: container)
        }
        let total = ContinuousClock.now - started
        print("systemd unit test: booted in \(booted - started), whole test \(total)")
    }

    /// docs/operations.md's Install, the user and the Start under systemd.
    static func installAndStart(in container: BootedContainer, tarball: String) async throws {
        let version = BuildInfo.version
        func steps(_ steps: [String]) -> String {
            steps.map { $0.replacingOccurrences(of: "VERSION", with: version) }.joined(separator: "\n")
        }
        let install = try await container.shell(
            "cd /root\ncp \(BootedContainer.exchange)/\(tarball) .\n" + steps(installSteps)
        )
        try #require(install.status == 0, "docs/operations.md's install failed in the container:\n\(install.output)")
        #expect(install.output.contains("pushgate \(version) (commit "), "\(install.output)")

        // The "edit" of the copied example is the test's configuration: the simulator, its CA, the key.
        // The steps run in the tarball's folder, where the operator is after the install, with the
        // credential files at hand there.
        let user = try await container.shell(
            """
            cd /root/pushgate-\(version)-linux-x86_64
            cp \(BootedContainer.exchange)/AuthKey_\(keyID).p8 \(BootedContainer.exchange)/backend.keys .
            \(steps(userSteps))
            cat \(BootedContainer.exchange)/pushgate.yaml > /etc/pushgate/pushgate.yaml
            install -m 0644 \(BootedContainer.exchange)/simulator-ca.pem /etc/pushgate/
            """
        )
        try #require(user.status == 0, "docs/operations.md's user and files failed:\n\(user.output)")

        let service = try await container.shell("cd /root/pushgate-\(version)-linux-x86_64\n" + steps(serviceSteps))
        let journal = try await container.journal()
        try #require(service.status == 0, "the unit did not start:\n\(service.output)\njournal:\n\(journal)")
        // `enable --now` of a Type=notify unit returns once the gateway sent READY=1 (without it systemd
        // waits out TimeoutStartSec and fails the start): the unit is active and started once.
        #expect(try await container.run("systemctl", "is-active", "pushgate").output == "active\n")
        let properties = try await container.properties("Type", "NRestarts", "MainPID", "UID", "SubState")
        #expect(properties["Type"] == "notify")
        #expect(properties["NRestarts"] == "0")
        #expect(properties["SubState"] == "running")
        // The docs' static user stands in for DynamicUser's: the gateway is not root.
        let pushgateUID = try await container.run("id", "-u", "pushgate").output
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(properties["UID"] == pushgateUID, "the service runs as \(properties["UID"] ?? "?")")
        #expect(pushgateUID != "0")
        // The ready line reaches the journal through the unit's standard error, which may lag READY=1.
        try await eventually("the journal has the gateway's ready line", timeout: .seconds(30)) {
            try await container.journal().contains("pushgate ready")
        }
    }

    /// The README's walkthrough through the unit's gateway, then a reload that swaps the API key and a
    /// journal rotation, and the watchdog's first ping.
    static func walkthroughAndReload(in container: BootedContainer, simulator: RunningAPNsSimulator) async throws {
        let journal = try await container.journal()
        let ready = try #require(
            journal.split(separator: "\n").first(where: { $0.contains("pushgate ready") }).map(String.init)
        )
        let registrationPort = try #require(ReleaseTarballTests.port(named: "udp.registration", in: ready))
        let notificationPort = try #require(ReleaseTarballTests.port(named: "udp.notification", in: ready))
        let httpPort = try #require(ready.firstMatch(of: /http\.port=(\d+)/).flatMap { Int($0.1) }, "\(ready)")

        let device = "be6406fe9e686c11f999c9d47e33b41be56be48f0c77570423bb89f5b51cf127"
        try UDPSender(port: registrationPort).send(#"{"device": "\#(device)", "group": "Choom"}"#)
        let notification = try UDPSender(port: notificationPort)
        let polls = Mutex(0)
        try await eventually("the simulator has the walkthrough's notification", timeout: .seconds(60)) {
            // The notification may overtake the registration (two sockets): sent again every 100 polls.
            let poll = polls.withLock { count in
                defer { count += 1 }
                return count
            }
            if poll % 100 == 0 {
                notification.send(
                    #"{"groups": ["Choom"], "type": "urgent", "payload": {"aps": {"alert": "Hello world!"}}}"#
                )
            }
            return !simulator.notifications(device: device).isEmpty
        }

        let deviceURL = URL(string: "http://127.0.0.1:\(httpPort)/v1/apps/news/devices/\(device)")!
        #expect(try await Self.status(of: deviceURL, key: firstKey) == 200)
        #expect(try await Self.status(of: deviceURL, key: secondKey) == 401)

        // `systemctl reload` after the key file changed: the new key works, the old one no longer does.
        let changed = try await container.shell(
            "printf '%s\\n' \(secondKey) > /etc/pushgate/backend.keys && systemctl reload pushgate"
        )
        #expect(changed.status == 0, "systemctl reload pushgate:\n\(changed.output)")
        try await eventually("the gateway logged the reload", timeout: .seconds(30)) {
            try await container.journal().contains("push.reload.changed=apiKeys")
        }
        #expect(try await Self.status(of: deviceURL, key: secondKey) == 200)
        #expect(try await Self.status(of: deviceURL, key: firstKey) == 401)

        // journald rotates the unit's log: after a rotation the gateway's next lines are in the new file.
        let rotated = try await container.shell("journalctl --rotate && systemctl reload pushgate")
        #expect(rotated.status == 0, "\(rotated.output)")
        try await eventually("the second reload is in the journal after its rotation", timeout: .seconds(30)) {
            try await container.journal().contains("push.reload.changed=nothing")
        }

        // WATCHDOG=1 every half of WatchdogSec=30: systemd's watchdog timestamp moves past the start.
        try await eventually("systemd received WATCHDOG=1", timeout: .seconds(60)) {
            let times = try await container.properties("WatchdogTimestampMonotonic", "ActiveEnterTimestampMonotonic")
            guard let fed = times["WatchdogTimestampMonotonic"].flatMap({ UInt64($0) }),
                let active = times["ActiveEnterTimestampMonotonic"].flatMap({ UInt64($0) })
            else { return false }
            return fed > active + 1_000_000
        }
        #expect(try await container.properties("NRestarts")["NRestarts"] == "0")
        #expect(!(try await container.journal()).contains(device), "full device tokens are never logged")
    }

    /// `systemctl stop`, then `systemd-analyze security`'s figure.
    static func stop(in container: BootedContainer) async throws {
        let stopped = try await container.run("systemctl", "stop", "pushgate")
        #expect(stopped.status == 0, "\(stopped.output)")
        let properties = try await container.properties("ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
        #expect(properties["ActiveState"] == "inactive")
        #expect(properties["Result"] == "success")
        // CLD_EXITED with status 0: the gateway ended by itself on SIGTERM, not killed.
        #expect(properties["ExecMainCode"] == "1" && properties["ExecMainStatus"] == "0", "\(properties)")
        #expect(try await container.journal().contains("pushgate stopped"))

        // A configuration error fails the start once, with exit 78 and the key in the journal, and systemd
        // does not restart it (RestartPreventExitStatus=78): it would only fail the same way again.
        let broken = try await container.shell(
            "printf 'too-short\\n' > /etc/pushgate/backend.keys\nsystemctl start pushgate"
        )
        #expect(broken.status != 0, "a start with a key of 9 characters succeeded:\n\(broken.output)")
        let failed = try await container.properties("ActiveState", "ExecMainStatus")
        #expect(failed["ActiveState"] == "failed", "\(failed): restarted after a configuration error")
        #expect(failed["ExecMainStatus"] == "78")
        #expect(try await container.journal().contains("apiKey.backend.file: /etc/pushgate/backend.keys line 1"))
        // The docs' check before a start says the same, with the same status.
        let checked = try await container.run(["/bin/sh", "-c", SystemdUnitTests.checkStep])
        #expect(checked.status == 78, "\(checked.output)")
        #expect(checked.output.contains("pushgate: apiKey.backend.file: /etc/pushgate/backend.keys line 1"))
        let restored = try await container.shell(
            "printf '%s\\n' \(SystemdUnitTests.secondKey) > /etc/pushgate/backend.keys\nsystemctl reset-failed pushgate"
        )
        #expect(restored.status == 0, "\(restored.output)")

        let security = try await container.run("systemd-analyze", "security", "--no-pager", "pushgate")
        let exposure = security.output.firstMatch(of: /Overall exposure level for pushgate\.service: (\d+\.\d+)/)
            .flatMap { Double($0.1) }
        #expect(exposure != nil && exposure! <= 2.0, "\(security.output.suffix(2000))")
        print("systemd-analyze security pushgate: \(exposure.map { "\($0)" } ?? "?")")
    }

    /// Without the unit, detached with -o: logrotate's snippet renames the file, its postrotate sends
    /// SIGHUP through the pid file, and the gateway writes on in a new file.
    static func logrotateDetached(in container: BootedContainer) async throws {
        let version = BuildInfo.version
        let log = "/var/log/pushgate/pushgate.log"
        let start = try await container.shell(
            "cd /root/pushgate-\(version)-linux-x86_64\n" + detachedSteps[0...2].joined(separator: "\n")
        )
        #expect(start.status == 0, "the detached daemon did not start:\n\(start.output)")
        let firstLog = try await container.run("cat", log).output
        #expect(firstLog.contains("pushgate ready"), "\(firstLog)")

        let rotate = try await container.shell(detachedSteps[3])
        #expect(rotate.status == 0, "\(rotate.output)")
        try await eventually("the gateway reopened its log file", timeout: .seconds(30)) {
            try await container.run("cat", log).output.contains("log file reopened")
        }
        let old = try await container.run("cat", log + ".1").output
        #expect(old.contains("pushgate ready") && !old.contains("log file reopened"), "\(old)")

        // The stop writes to the new file, and the pid file goes with the daemon (in the container's /run,
        // a tmpfs of its own: asked inside).
        let stopped = try await container.shell("kill -TERM \"$(cat /run/pushgate/pushgate.pid)\"")
        #expect(stopped.status == 0, "\(stopped.output)")
        try await eventually("the detached daemon stopped", timeout: .seconds(60)) {
            try await container.run("test", "-e", "/run/pushgate/pushgate.pid").status != 0
        }
        let current = try await container.run("cat", log).output
        #expect(current.contains("pushgate stopped"), "\(current)")
    }

    /// The configuration the test puts in /etc/pushgate/pushgate.yaml: one app at the simulator, ports
    /// the kernel picks (the container shares the host's loopback with other tests), a key file.
    static func configuration(apnsPort: Int) -> String {
        """
        listen: 127.0.0.1
        udp:
          registrationPort: 0
          notificationPort: 0
        http:
          port: 0
        store:
          path: /var/lib/pushgate/pushgate.db
        instanceId: pushgate-1
        apiKeys: [backend]
        apiKey:
          backend:
            file: /etc/pushgate/backend.keys
        apps: [news]
        app:
          news:
            topic: \(topic)
            environment: production
            apnsHost: 127.0.0.1:\(apnsPort)
            ca: /etc/pushgate/simulator-ca.pem
            token:
              keyFile: /etc/pushgate/AuthKey_\(keyID).p8
              keyId: \(keyID)
              teamId: \(teamID)

        """
    }

    /// The HTTP status of a GET with a bearer key.
    static func status(of url: URL, key: String) async throws -> Int {
        var request = URLRequest(url: url)
        request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSession.shared.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    /// The commands of a Markdown document's indented code blocks, one a line, without a trailing comment.
    static func commandLines(of document: String) -> [String] {
        document.split(separator: "\n", omittingEmptySubsequences: true).compactMap { line in
            guard line.hasPrefix("    ") else { return nil }
            let command = line.replacing(/\s+#\s.*$/, with: "").trimmingCharacters(in: .whitespaces)
            return command.isEmpty ? nil : command
        }
    }
}
