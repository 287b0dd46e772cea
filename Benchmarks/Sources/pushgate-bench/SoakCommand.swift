import ArgumentParser
import Foundation

/// `pushgate-bench soak`: the gateway under continuous load with every simulator fault on at once,
/// for a long time (issue #13, "Prove it" 5). Checks that nothing is lost and that the gateway's
/// resident memory, open files, threads and CPU stay flat after a warm-up.
struct SoakCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "A long run of the gateway (a child process) with faults: 0 lost, flat RSS/fds/threads/CPU.",
        discussion: """
            Fills a SQLite store with --devices devices in group "soak", starts `pushgate simulate` (per-device \
            tracking on, no full records) with 503s, GOAWAYs, 410 for a share of the devices, a dropped \
            connection every --drop-every seconds and bursts of 429, then `pushgate gateway`. Broadcasts to \
            the group every --broadcast-every seconds, registers new devices over UDP at --registrations-per-second \
            in groups of --registration-group, and notifies the newest full registration group every \
            --single-every seconds. At the end it waits for every request to finish and accounts for every \
            target; it exits non-zero when something is lost or a metric drifts.
            """
    )

    @OptionGroup var gateway: GatewayBenchOptions

    @Option(help: "Minutes of load (then the drain and the accounting).")
    var minutes: Double = 60

    @Option(
        name: .customLong("warmup-minutes"),
        help: "Minutes before the metrics' reference sample (default: min(10, minutes / 3))."
    )
    var warmupMinutes: Double?

    @Option(help: "Devices in the broadcast group.")
    var devices: Int = 10_000

    @Option(name: .customLong("broadcast-every"), help: "Seconds between broadcasts to the whole group.")
    var broadcastEvery: Double = 5

    @Option(name: .customLong("single-every"), help: "Seconds between notifications to one registration group.")
    var singleEvery: Double = 2

    @Option(name: .customLong("registrations-per-second"), help: "New devices registered over UDP per second.")
    var registrationsPerSecond: Int = 20

    @Option(name: .customLong("registration-group"), help: "Devices per registration group.")
    var registrationGroup: Int = 100

    @Option(name: .customLong("sample-every"), help: "Seconds between metric samples.")
    var sampleEvery: Double = 15

    @Option(name: .customLong("rate-503"), help: "Share of requests the simulator answers 503.")
    var rate503: Double = 0.05

    @Option(name: .customLong("goaway-after"), help: "GOAWAY on each connection after this many streams.")
    var goAwayAfter: Int = 10_000

    @Option(name: .customLong("drop-every"), help: "Seconds between dropped connections (drop_now).")
    var dropEvery: Double = 60

    @Option(
        name: .customLong("latency-ms"),
        help: "The simulator holds every answer this long (latency_ms; 0: at once), a distant APNs."
    )
    var latencyMilliseconds: Int = 0

    @Option(name: .customLong("unregistered-share"), help: "Share of the broadcast group answered 410 Unregistered.")
    var unregisteredShare: Double = 0.01

    @Option(name: .customLong("burst-every"), help: "Seconds between bursts of 429.")
    var burstEvery: Double = 180

    @Option(name: .customLong("burst-seconds"), help: "Length of a burst of 429.")
    var burstSeconds: Double = 10

    @Option(name: .customLong("burst-rate"), help: "rate_429 during a burst.")
    var burstRate: Double = 0.5

    @Option(
        name: .customLong("cpu-window"),
        help: "Seconds over which CPU samples are averaged before they are judged (a rate is noisy per sample)."
    )
    var cpuWindowSeconds: Double = 60

    @Option(
        name: .customLong("count-window"),
        help: """
            Seconds over which the open fds and threads are taken as their median before they are judged (a \
            connection being replaced or a Dispatch worker retiring at the instant of a sample moves one sample).
            """
    )
    var countWindowSeconds: Double = 60

    @Option(help: "Largest drift from the post-warm-up value that passes, as a fraction.")
    var tolerance: Double = 0.10

    @Option(name: .customLong("drain-seconds"), help: "Most seconds to wait for the last requests to finish.")
    var drainSeconds: Int = 300

    @Option(
        name: .customLong("registry-devices"),
        help: """
            Devices with random tokens registered before the start in a group never notified, so that the \
            store is production-sized: the gateway's SQLite page caches (bounded by cache_size: 32 MiB for the \
            writer, 2 MiB per reader) are full by the end of the warm-up, as in a gateway that has run for a \
            while, instead of filling during the hour as a small store grows. 0: a store of --devices only.
            """
    )
    var registryDevices: Int = 1_000_000

    @Flag(name: .customLong("keep-work"), help: "Keep the store and the CA file at the end (always kept on a failure).")
    var keepWork = false

    func validate() throws {
        guard minutes > 0, minutes <= 24 * 60 else { throw ValidationError("--minutes must be in (0, 1440]") }
        guard devices >= 100 else { throw ValidationError("--devices must be at least 100") }
        guard registryDevices >= 0 else { throw ValidationError("--registry-devices must be at least 0") }
        guard broadcastEvery > 0, singleEvery > 0, sampleEvery > 0, dropEvery > 0, burstEvery > 0 else {
            throw ValidationError("the periods must be positive")
        }
        guard registrationsPerSecond >= 0, registrationGroup >= 1 else {
            throw ValidationError("--registrations-per-second ≥ 0 and --registration-group ≥ 1")
        }
        guard (0...1).contains(rate503), (0...1).contains(burstRate), rate503 + burstRate <= 1 else {
            throw ValidationError("--rate-503 and --burst-rate are shares, and their sum at most 1")
        }
        guard (0..<1).contains(unregisteredShare) else {
            throw ValidationError("--unregistered-share must be in [0, 1)")
        }
        guard burstSeconds >= 0, burstSeconds < burstEvery else {
            throw ValidationError("--burst-seconds must be shorter than --burst-every")
        }
        guard goAwayAfter >= 1 else { throw ValidationError("--goaway-after must be at least 1") }
        guard latencyMilliseconds >= 0 else { throw ValidationError("--latency-ms must be at least 0") }
        if gateway.apnsHost != nil || gateway.rttMilliseconds != nil {
            throw ValidationError(
                "soak needs our simulator (its faults and per-device counts): no --apns-host, --rtt-ms"
            )
        }
    }

    var warmupSeconds: Double { (warmupMinutes ?? min(10, minutes / 3)) * 60 }

    func run() async throws {
        ChildProcesses.installSignalHandlers()
        let report = Report(json: false)
        do {
            let passed = try await SoakRun(command: self, report: report).run()
            if !passed { throw ExitCode.failure }
        } catch let error as BenchError {
            report.line("pushgate-bench soak: \(error.description)")
            throw ExitCode.failure
        }
    }
}
