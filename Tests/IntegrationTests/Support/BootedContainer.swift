import Foundation
import PushgateCore

#if canImport(Glibc)
import Glibc
#endif

/// A Debian root booted by `systemd-nspawn -b` (systemd as its PID 1) under a throwaway overlay (the root
/// stays as it was: what the boot writes goes to a tmpfs, gone at the halt, no copy to make or delete),
/// commands run in it with `nsenter` (which works whether or not the host runs systemd and machined).
final class BootedContainer: Sendable {
    enum Boot {
        case booted(BootedContainer)
        case cannotBoot(String)
    }

    let machine: String
    private let nspawn: SpawnedProcess
    private let leader: Int32
    private let console: OutputCollector

    /// Where the host's exchange folder is inside, read-only.
    static let exchange = "/mnt/pushgate-test"

    private init(machine: String, nspawn: SpawnedProcess, leader: Int32, console: OutputCollector) {
        self.machine = machine
        self.nspawn = nspawn
        self.leader = leader
        self.console = console
    }

    /// What the commands run inside see: none of the test run's environment.
    static let environment = ["PATH": "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"]

    /// Boots the root with `exchange` at ``exchange`` inside; `.cannotBoot` with nspawn's words if systemd
    /// does not come up.
    static func boot(_ root: String, exchange: String) async throws -> Boot {
        let machine = "pushgate-test-\(UUID().uuidString.prefix(8).lowercased())"

        let nspawn = SpawnedProcess()
        nspawn.executableURL = URL(fileURLWithPath: ExternalTools.path(of: "systemd-nspawn")!)
        // No --private-network: the container shares the host's loopback with the simulator and the test.
        // --register=no: no machined needed. Without systemd on the host there is no bus to ask for a scope
        // either: --keep-unit leaves the container in the test's own cgroup.
        var arguments = [
            "--quiet", "--boot", "--directory", root, "--volatile=overlay", "--bind-ro=\(exchange):\(Self.exchange)",
            "--machine", machine, "--register=no",
        ]
        if !FileManager.default.fileExists(atPath: "/run/systemd/system") { arguments.append("--keep-unit") }
        nspawn.arguments = arguments + ["--console=pipe"]
        nspawn.environment = environment
        let console = OutputCollector()
        let pipe = Pipe()
        nspawn.standardInput = FileHandle.nullDevice
        nspawn.standardOutput = pipe
        nspawn.standardError = pipe
        pipe.fileHandleForReading.readChunksInBackground({ console.append($0) }, onEnd: { console.end() })
        try nspawn.run()

        // The container's PID 1 is nspawn's child; then systemd says when the boot is over.
        var leader: Int32?
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline && nspawn.isRunning {
            if leader == nil { leader = childProcess(of: nspawn.processIdentifier) }
            if let leader {
                let state = try await run(["systemctl", "is-system-running"], leader: leader).output
                if state.hasPrefix("running") || state.hasPrefix("degraded") {
                    let container = BootedContainer(
                        machine: machine,
                        nspawn: nspawn,
                        leader: leader,
                        console: console
                    )
                    if state.hasPrefix("degraded") {
                        let failed = try await container.run("systemctl", "--failed", "--no-legend").output
                        print("the container booted degraded (not pushgate's doing): \(failed)")
                    }
                    return .booted(container)
                }
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        var state = "unknown"
        if let leader { state = try await run(["systemctl", "is-system-running"], leader: leader).output }
        let container = BootedContainer(
            machine: machine,
            nspawn: nspawn,
            leader: leader ?? 0,
            console: console
        )
        container.remove()
        let exited = nspawn.isRunning ? "still running after 120 s" : "exited with \(nspawn.terminationStatus)"
        return .cannotBoot(
            "systemd-nspawn \(exited), system state \(state.trimmingCharacters(in: .whitespacesAndNewlines)): "
                + console.text.suffix(2000).trimmingCharacters(in: .whitespacesAndNewlines)
        )
    }

    /// The pid whose parent is `parent` (from /proc/PID/stat: the parent is the second field after the
    /// command name, which may itself hold spaces and parentheses).
    static func childProcess(of parent: Int32) -> Int32? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        for entry in entries {
            guard let pid = Int32(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == parent { return pid }
        }
        return nil
    }

    func run(_ command: String...) async throws -> (status: Int32, output: String) {
        try await Self.run(command, leader: leader)
    }

    /// A shell script run inside, stopping at the first failing command, each command echoed first.
    func shell(_ script: String) async throws -> (status: Int32, output: String) {
        try await Self.run(["/bin/sh", "-exc", script], leader: leader)
    }

    /// The unit's journal, its messages only.
    func journal() async throws -> String {
        try await run("journalctl", "--unit", "pushgate", "--output", "cat", "--no-pager").output
    }

    /// `systemctl show pushgate`'s values of these properties.
    func properties(_ names: String...) async throws -> [String: String] {
        let shown = try await run(["systemctl", "show", "pushgate"] + names.flatMap { ["--property", $0] }).output
        return Dictionary(
            shown.split(separator: "\n").compactMap { line -> (String, String)? in
                guard let equals = line.firstIndex(of: "=") else { return nil }
                return (String(line[..<equals]), String(line[line.index(after: equals)...]))
            },
            uniquingKeysWith: { first, _ in first }
        )
    }

    func run(_ command: [String]) async throws -> (status: Int32, output: String) {
        try await Self.run(command, leader: leader)
    }

    /// Runs a command in every namespace of the container's PID 1 (its root, its systemd, its journal), to
    /// its end, on a Dispatch thread (the simulator needs Swift's cooperative threads).
    static func run(_ command: [String], leader: Int32) async throws -> (status: Int32, output: String) {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: ExternalTools.path(of: "nsenter")!)
        process.arguments = ["--target", "\(leader)", "--all", "--"] + command
        process.environment = environment
        let pipe = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = pipe
        process.standardError = pipe
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

    /// Powers the container off (SIGTERM to nspawn halts it cleanly); its overlay goes with it.
    func remove() {
        let started = ContinuousClock.now
        if nspawn.isRunning {
            kill(nspawn.processIdentifier, SIGTERM)
            let exited = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                self.nspawn.waitUntilExit()
                exited.signal()
            }
            if exited.wait(timeout: .now() + 60) == .timedOut {
                kill(nspawn.processIdentifier, SIGKILL)
                nspawn.waitUntilExit()
            }
        }
        print("container \(machine): halted in \(ContinuousClock.now - started)")
        // nspawn's own bookkeeping on the host, which it cannot remove itself where /run is not a tmpfs.
        _ = try? ExternalTools.run("rm", ["-rf", "--one-file-system", "/run/systemd/nspawn/propagate/\(machine)"])
    }
}
