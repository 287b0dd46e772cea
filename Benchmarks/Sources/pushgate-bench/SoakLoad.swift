import Foundation
import Synchronization

/// What the soak's load has sent so far, shared by its sending tasks.
final class SoakCounters: Sendable {
    struct Values: Sendable {
        var broadcasts = 0
        var singles = 0
        var registrations = 0
        var sendFailures = 0
        var drops = 0
        var bursts = 0
        var controlFailures = 0
    }

    private let values = Mutex(Values())

    func update(_ body: (inout Values) -> Void) { values.withLock { body(&$0) } }
    var now: Values { values.withLock { $0 } }
}

/// The soak's traffic and faults: each a periodic task until the deadline.
struct SoakLoad: Sendable {
    static let group = "soak"
    /// The devices that make the store production-sized (`--registry-devices`): never notified.
    static let registryGroup = "registry"

    var ports: GatewayProcess.Ports
    var controlPort: Int
    var counters: SoakCounters
    var broadcastEvery: Double
    var singleEvery: Double
    var registrationsPerSecond: Int
    var registrationGroup: Int
    var dropEvery: Double
    var burstEvery: Double
    var burstSeconds: Double
    var burstRate: Double

    static func notification(group: String, sequence: Int) -> [UInt8] {
        Array(
            #"{"groups":["\#(group)"],"type":"urgent","payload":{"aps":{"alert":"soak"},"soak":\#(sequence)}}"#.utf8
        )
    }

    static func registrationGroupName(_ index: Int) -> String { "reg-\(index)" }

    /// Runs every task until `deadline`.
    func run(
        until deadline: ContinuousClock.Instant,
        sample: @escaping @Sendable () -> Void,
        sampleEvery: Double
    )
        async throws
    {
        let sender = try DatagramSender()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await every(broadcastEvery, until: deadline) { sequence in broadcast(sender, sequence) }
            }
            group.addTask { try await every(singleEvery, until: deadline) { sequence in single(sender, sequence) } }
            if registrationsPerSecond > 0 {
                group.addTask { try await every(1, until: deadline) { _ in register(sender) } }
            }
            group.addTask {
                try await every(dropEvery, until: deadline, skipFirst: true) { _ in
                    control(#"{"drop_now":true}"#) { $0.drops += 1 }
                }
            }
            if burstSeconds > 0 && burstRate > 0 {
                group.addTask {
                    try await every(burstEvery, until: deadline, skipFirst: true) { _ in
                        control(#"{"rate_429":\#(burstRate)}"#) { $0.bursts += 1 }
                        try await Task.sleep(for: .seconds(burstSeconds))
                        control(#"{"rate_429":0}"#) { _ in }
                    }
                }
            }
            group.addTask { try await every(sampleEvery, until: deadline, skipFirst: true) { _ in sample() } }
            try await group.waitForAll()
        }
        control(#"{"rate_429":0}"#) { _ in }
    }

    private func broadcast(_ sender: DatagramSender, _ sequence: Int) {
        let sent = sender.send(Self.notification(group: Self.group, sequence: sequence), port: ports.notification)
        counters.update {
            if sent { $0.broadcasts += 1 } else { $0.sendFailures += 1 }
        }
    }

    /// To one of the full registration groups, in turn.
    private func single(_ sender: DatagramSender, _ sequence: Int) {
        let full = counters.now.registrations / registrationGroup
        guard full > 0 else { return }
        let group = Self.registrationGroupName(sequence % full)
        let sent = sender.send(Self.notification(group: group, sequence: sequence), port: ports.notification)
        counters.update {
            if sent { $0.singles += 1 } else { $0.sendFailures += 1 }
        }
    }

    private func register(_ sender: DatagramSender) {
        let first = counters.now.registrations
        var sent = 0
        for index in first..<(first + registrationsPerSecond) {
            let group = Self.registrationGroupName(index / registrationGroup)
            let datagram = #"{"device":"\#(BenchDevices.randomLookingHex(index))","group":"\#(group)"}"#
            if sender.send(Array(datagram.utf8), port: ports.registration) { sent += 1 }
        }
        counters.update {
            $0.registrations += sent
            $0.sendFailures += registrationsPerSecond - sent
        }
    }

    private func control(_ body: String, counted: (inout SoakCounters.Values) -> Void) {
        do {
            _ = try ControlAPI.requestJSON(
                port: controlPort,
                method: "POST",
                path: "/faults",
                body: body,
                timeoutSeconds: 30
            )
            counters.update(counted)
        } catch {
            counters.update { $0.controlFailures += 1 }
            FileHandle.standardError.write(Data("soak: control API \(body): \(error)\n".utf8))
        }
    }

    /// Calls `body` with 0, 1, 2, ... every `period` seconds (on a fixed schedule) until `deadline`.
    /// Ticks missed while this process was not scheduled are skipped, not made up in a burst (a burst
    /// of samples one second apart makes the CPU share per sample meaningless).
    private func every(
        _ period: Double,
        until deadline: ContinuousClock.Instant,
        skipFirst: Bool = false,
        _ body: (Int) async throws -> Void
    ) async throws {
        var next = ContinuousClock.now + (skipFirst ? .seconds(period) : .zero)
        var index = 0
        while next < deadline {
            try await Task.sleep(until: next, clock: .continuous)
            try await body(index)
            index += 1
            next += .seconds(period)
            let now = ContinuousClock.now
            while next <= now { next += .seconds(period) }
        }
    }
}
