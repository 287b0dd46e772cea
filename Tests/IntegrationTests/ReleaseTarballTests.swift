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

/// The release tarball where it will run: unpacked and installed as INSTALL says into a fresh Debian 12
/// root (debootstrap's minbase: no Swift, no compiler, only what every Debian system has, plus the
/// libsqlite3-0 that INSTALL asks for), started there in a chroot against the APNs simulator on the
/// host's loopback (a chroot shares the host's network), and put through the pushd walkthrough and
/// `pushgate send`.
///
/// It needs the tarball (scripts/release.sh; `.ci/run` makes it and names it in PUSHGATE_RELEASE_TARBALL),
/// root, debootstrap and a Debian mirror in the machine's apt configuration. Without one of them it is
/// skipped, saying which; with PUSHGATE_RELEASE_TARBALL set, a missing one fails it instead (CI must not
/// skip it quietly).
@Suite("The release tarball in a fresh Debian 12 root", .serialized, .timeLimit(.minutes(20)))
struct ReleaseTarballTests {
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"
    static let topic = "com.example.pushgate"

    /// The minbase root, made once and kept between runs (debootstrap takes half a minute to minutes and
    /// ~210 MB); each run works on a copy of it, so every run starts from a fresh root.
    static let cachedRoot = "/var/cache/pushgate-tests/debian12-minbase"

    /// Where the tarball is: PUSHGATE_RELEASE_TARBALL, else what scripts/release.sh writes by default.
    static var tarball: (path: String, required: Bool) {
        if let named = ProcessInfo.processInfo.environment["PUSHGATE_RELEASE_TARBALL"], !named.isEmpty {
            return (named, true)
        }
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let name = "pushgate-\(BuildInfo.version)-linux-x86_64.tar.gz"
        return (packageRoot.appendingPathComponent(".build-release/dist/\(name)").path, false)
    }

    /// Why the test cannot run here; nil when it can.
    static let missing: String? = {
        if !FileManager.default.fileExists(atPath: tarball.path) {
            return "no release tarball at \(tarball.path): run scripts/release.sh (or set PUSHGATE_RELEASE_TARBALL)"
        }
        if geteuid() != 0 { return "debootstrap and chroot need root" }
        if !ExternalTools.isInstalled("debootstrap") {
            return "debootstrap is not installed (apt-get install debootstrap)"
        }
        if !FileManager.default.fileExists(atPath: cachedRoot + "/.complete") && DebianMirror.configured() == nil {
            return "no Debian mirror in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list for debootstrap"
        }
        return nil
    }()

    static let skipComment = Comment(rawValue: "release tarball in a chroot skipped: \(missing ?? "")")

    @Test(
        "installed per INSTALL in a minbase Debian 12 chroot: --version names the build's commit, the walkthrough delivers, `send` is accepted, /openapi.yaml is served",
        .enabled(
            if: ReleaseTarballTests.missing == nil || ReleaseTarballTests.tarball.required,
            ReleaseTarballTests.skipComment
        )
    )
    func walkthroughInChroot() async throws {
        if let missing = Self.missing {
            // Only reached when PUSHGATE_RELEASE_TARBALL asked for this test.
            Issue.record("PUSHGATE_RELEASE_TARBALL is set but the test cannot run: \(missing)")
            return
        }
        let started = ContinuousClock.now
        let root = try await DebianRoot.fresh(copyOf: Self.cachedRoot)
        defer { root.remove() }
        let prepared = ContinuousClock.now
        let version = BuildInfo.version
        let tarballName = URL(fileURLWithPath: Self.tarball.path).lastPathComponent
        let unpacked = String(tarballName.dropLast(".tar.gz".count))
        try FileManager.default.copyItem(atPath: Self.tarball.path, toPath: root.path + "/tmp/" + tarballName)

        // INSTALL, steps 1 and 2, as written there (libsqlite3-0 is in the cached root already).
        let install = try await root.run(
            "/bin/sh",
            "-ec",
            """
            cd /tmp
            tar -xzf \(tarballName)
            cd \(unpacked)
            install -d /usr/local/lib/pushgate-\(version)
            cp -R bin/. /usr/local/lib/pushgate-\(version)/
            ln -sfn /usr/local/lib/pushgate-\(version)/pushgate /usr/local/bin/pushgate
            install -d /etc/pushgate /var/lib/pushgate
            """
        )
        #expect(install.status == 0, "INSTALL's steps failed in the chroot:\n\(install.output)")
        // No Swift in the root: the binary has to carry its runtime.
        #expect(!FileManager.default.fileExists(atPath: root.path + "/usr/bin/swift"))

        let versionLine = try await root.run("/usr/local/bin/pushgate", "--version")
        #expect(versionLine.status == 0, "\(versionLine.output)")
        let build = try String(contentsOfFile: root.path + "/tmp/\(unpacked)/BUILD", encoding: .utf8)
        let builtAs = build.split(separator: "\n").first.map(String.init) ?? ""
        #expect(builtAs.hasPrefix("pushgate \(version) (commit "), "BUILD: \(build)")
        #expect(versionLine.output.trimmingCharacters(in: .whitespacesAndNewlines) == builtAs)
        // The licences of what is linked in travel with the binary: NIO's (Apache-2.0, with its NOTICE) and
        // GRDB's (MIT) stand for the rest, which release.sh refuses to leave out.
        for licence in ["swift-nio/LICENSE.txt", "swift-nio/NOTICE.txt", "GRDB.swift/LICENSE"] {
            #expect(
                FileManager.default.fileExists(atPath: root.path + "/tmp/\(unpacked)/licenses/\(licence)"),
                "the tarball has no licenses/\(licence)"
            )
        }

        let key = P256.Signing.PrivateKey()
        try key.pemRepresentation.write(
            toFile: root.path + "/etc/pushgate/AuthKey.p8",
            atomically: true,
            encoding: .utf8
        )
        var configuration = APNsSimulator.Configuration()
        configuration.tokenKeys = [ProviderTokenKey(keyID: Self.keyID, teamID: Self.teamID, publicKey: key.publicKey)]
        configuration.logger = TestLogger.make("simulator")
        try await APNsSimulator.withRunning(configuration) { simulator in
            try FileManager.default.copyItem(
                atPath: simulator.caCertificatePath!,
                toPath: root.path + "/etc/pushgate/simulator-ca.pem"
            )
            let apns = [
                "--apns-host", "127.0.0.1:\(simulator.port)", "--ca", "/etc/pushgate/simulator-ca.pem",
                "--auth-key", "/etc/pushgate/AuthKey.p8", "--key-id", Self.keyID, "--team-id", Self.teamID,
                "--topic", Self.topic,
            ]
            try await Self.walkthrough(in: root, apns: apns, simulator: simulator)

            // `pushgate send`, from inside the root too.
            let device = String(repeating: "5e", count: 32)
            let sent = try await root.run(
                ["/usr/local/bin/pushgate", "send", "--device", device, "--alert", "Hello from send"] + apns
            )
            #expect(sent.status == 0, "pushgate send in the chroot:\n\(sent.output)")
            #expect(simulator.notifications(device: device).count == 1)
        }
        let total = ContinuousClock.now - started
        print("release tarball in a chroot: root ready in \(prepared - started), whole test \(total)")
    }

    /// The README's walkthrough: a device registered over UDP, its group notified, the simulator has it;
    /// the gateway also serves its OpenAPI document from the bundle beside the binary.
    static func walkthrough(in root: DebianRoot, apns: [String], simulator: RunningAPNsSimulator) async throws {
        let gateway = SpawnedProcess()
        gateway.executableURL = URL(fileURLWithPath: "/usr/sbin/chroot")
        gateway.arguments =
            [
                root.path, "/usr/local/bin/pushgate", "-f", "-d", "/var/lib/pushgate/pushgate.db", "-l", "127.0.0.1",
                "-g", "0", "-n", "0", "--http-port", "0",
            ] + apns
        gateway.environment = DebianRoot.environment
        let output = OutputCollector()
        let pipe = Pipe()
        gateway.standardError = pipe
        gateway.standardOutput = FileHandle.nullDevice
        pipe.fileHandleForReading.readChunksInBackground({ output.append($0) }, onEnd: { output.end() })
        try gateway.run()
        defer { if gateway.isRunning { kill(gateway.processIdentifier, SIGKILL) } }
        try await eventually("the gateway in the chroot is ready", timeout: .seconds(120)) {
            if !gateway.isRunning { throw ExternalTools.ToolError("pushgate exited early:\n\(output.text)") }
            return output.text.contains("pushgate ready")
        }
        let ready = try #require(
            output.text.split(separator: "\n").first(where: { $0.contains("pushgate ready") }).map(String.init)
        )
        let registrationPort = try #require(Self.port(named: "udp.registration", in: ready), "\(ready)")
        let notificationPort = try #require(Self.port(named: "udp.notification", in: ready), "\(ready)")
        let httpPort = try #require(
            ready.firstMatch(of: /http\.port=(\d+)/).flatMap { Int($0.1) },
            "\(ready)"
        )

        let device = "be6406fe9e686c11f999c9d47e33b41be56be48f0c77570423bb89f5b51cf127"
        try UDPSender(port: registrationPort).send(#"{"device": "\#(device)", "group": "Choom"}"#)
        let notification = try UDPSender(port: notificationPort)
        let polls = Mutex(0)
        try await eventually("the simulator has the walkthrough's notification", timeout: .seconds(60)) {
            // The notification may overtake the registration (two sockets): sent again every 100 polls
            // until the simulator has it.
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
        try await eventually("the gateway logged the request as done", timeout: .seconds(30)) {
            output.text.contains("push.accepted=1") && output.text.contains("notification request done")
        }

        let (document, response) = try await URLSession.shared.data(
            from: URL(string: "http://127.0.0.1:\(httpPort)/openapi.yaml")!
        )
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: document, as: UTF8.self).hasPrefix("openapi: 3.1"))

        kill(gateway.processIdentifier, SIGTERM)
        try await eventually("the gateway stopped", timeout: .seconds(60)) { !gateway.isRunning }
        #expect(gateway.terminationStatus == 0, "\(output.text)")
        #expect(!output.text.contains(device), "full device tokens are never logged")
    }

    /// The port of `NAME=[IPv4]127.0.0.1/127.0.0.1:PORT` on the ready line.
    static func port(named name: String, in line: String) -> Int? {
        guard let field = line.split(separator: " ").first(where: { $0.hasPrefix(name + "=") }),
            let colon = field.lastIndex(of: ":")
        else { return nil }
        return Int(field[field.index(after: colon)...])
    }
}

/// The Debian mirror this machine's apt uses, read at run time: the machines here reach only the one
/// configured, and no host name belongs in the repository.
enum DebianMirror {
    static func configured() -> String? {
        if let sources = try? String(contentsOfFile: "/etc/apt/sources.list.d/debian.sources", encoding: .utf8) {
            // deb822 stanzas: the one whose Suites include plain `bookworm` (not bookworm-security).
            for stanza in sources.components(separatedBy: "\n\n") {
                let fields = Dictionary(
                    stanza.split(separator: "\n").compactMap { line -> (String, String)? in
                        guard let colon = line.firstIndex(of: ":"), !line.hasPrefix("#") else { return nil }
                        return (
                            String(line[..<colon]).lowercased(),
                            line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                        )
                    },
                    uniquingKeysWith: { first, _ in first }
                )
                let suites = (fields["suites"] ?? "").split(separator: " ")
                if suites.contains("bookworm"), let uri = fields["uris"]?.split(separator: " ").first {
                    return String(uri)
                }
            }
        }
        if let list = try? String(contentsOfFile: "/etc/apt/sources.list", encoding: .utf8) {
            // One-line form: `deb [options] URI bookworm main`.
            for line in list.split(separator: "\n") {
                let words = line.split(separator: " ").filter { !$0.hasPrefix("[") && !$0.hasSuffix("]") }
                if words.count >= 3, words[0] == "deb", words[2] == "bookworm" { return String(words[1]) }
            }
        }
        return nil
    }
}

/// A copy of the cached minbase root with /proc mounted (the gateway reads /proc/self/exe; Foundation
/// finds the resource bundle through it), removed after the test.
final class DebianRoot: Sendable {
    let path: String

    private init(path: String) { self.path = path }

    /// Makes the cached root with debootstrap if it is not there yet, into a folder beside it renamed when
    /// complete: an interrupted run leaves no half root. Shared by the chroot and the booted-systemd tests.
    static func makeCachedRoot(_ cached: String, packages: String) async throws {
        if FileManager.default.fileExists(atPath: cached + "/.complete") { return }
        guard let mirror = DebianMirror.configured() else {
            throw ExternalTools.ToolError("no Debian mirror in the apt configuration")
        }
        let building = cached + ".partial"
        _ = try await ExternalTools.runOffPool("rm", ["-rf", "--one-file-system", building])
        try FileManager.default.createDirectory(
            atPath: URL(fileURLWithPath: cached).deletingLastPathComponent().path,
            withIntermediateDirectories: true
        )
        let made = try await ExternalTools.runOffPool(
            "debootstrap",
            ["--variant=minbase", "--include=\(packages)", "bookworm", building, mirror]
        )
        guard made.status == 0 else {
            throw ExternalTools.ToolError("debootstrap failed (\(made.status)):\n\(made.output.suffix(4000))")
        }
        guard FileManager.default.createFile(atPath: building + "/.complete", contents: Data()) else {
            throw ExternalTools.ToolError("cannot write \(building)/.complete")
        }
        _ = try await ExternalTools.runOffPool("rm", ["-rf", "--one-file-system", cached])
        try FileManager.default.moveItem(atPath: building, toPath: cached)
    }

    /// Makes the cached root if it is not there yet (debootstrap, once), then copies it.
    static func fresh(copyOf cached: String) async throws -> DebianRoot {
        try await makeCachedRoot(cached, packages: "libsqlite3-0")
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-root-\(UUID().uuidString)")
            .path
        let copied = try await ExternalTools.runOffPool("cp", ["-a", cached, copy])
        guard copied.status == 0 else { throw ExternalTools.ToolError("cp -a \(cached): \(copied.output)") }
        let root = DebianRoot(path: copy)
        let mounted = try await ExternalTools.runOffPool("mount", ["-t", "proc", "proc", copy + "/proc"])
        guard mounted.status == 0 else {
            root.remove()
            throw ExternalTools.ToolError("mount -t proc in the root: \(mounted.output)")
        }
        return root
    }

    /// Runs a command inside the root (chroot) to its end.
    func run(_ command: String...) async throws -> (status: Int32, output: String) {
        try await run(command)
    }

    func run(_ command: [String]) async throws -> (status: Int32, output: String) {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/chroot")
        process.arguments = [path] + command
        process.environment = Self.environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        // The wait on a Dispatch thread, not one of Swift's cooperative threads (the simulator needs them).
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result {
                        try process.run()
                        let data = pipe.fileHandleForReading.readToEndRetryingInterrupts()
                        process.waitUntilExit()
                        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
                    }
                )
            }
        }
    }

    /// What a service's environment would hold: none of the host's (no PUSHGATE_ keys of the test run,
    /// no TMPDIR outside the root).
    static let environment = ["PATH": "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"]

    /// Unmounts /proc and deletes the copy (never crossing into a mount that is still there).
    func remove() {
        _ = try? ExternalTools.run("umount", [path + "/proc"])
        _ = try? ExternalTools.run("rm", ["-rf", "--one-file-system", path])
    }
}
