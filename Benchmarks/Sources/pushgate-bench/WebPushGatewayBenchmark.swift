import ArgumentParser
import Foundation
import PushgateCore
import WebPush

/// `pushgate-bench webpush-gateway`: a broadcast to N browser subscriptions on one origin through the
/// gateway, in the same run (same gateway process, same store) as an APNs broadcast of N phones, each
/// measured as `e2e` measures the APNs one: the gateway a child process, CPU read from its /proc.
struct WebPushGatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webpush-gateway",
        abstract: "N browsers on one origin and N APNs devices, one broadcast each, through the gateway.",
        discussion: """
            Starts our APNs simulator and our Web Push simulator (pushgate simulate --webpush-port 0) as \
            processes of their own, makes N subscriptions in the Web Push simulator (each with its own key \
            pair, made for the bench's VAPID key), fills a fresh SQLite store with N APNs devices in group \
            'apns' and the N browsers in group 'webpush' (directly, as e2e does), starts pushgate gateway \
            with the app's webpush.* keys, and sends one notification request per group over UDP: APNs \
            first, then Web Push. Each broadcast is timed to its simulator's count of answers and its \
            gateway CPU read from /proc. With --webpush-decrypt-every 1 the Web Push simulator verifies every \
            VAPID signature and decrypts every message (the checking mode); by default it checks what a real \
            push service checks (a signature once per distinct Authorization header, every message's headers \
            and aes128gcm record header) and decrypts every 100th message, so that the gateway can be driven \
            at a real service's rate and wrong encryption still fails the run. The encryption's own cost is \
            measured in this process first.
            """
    )

    @OptionGroup var gateway: GatewayBenchOptions

    @Option(help: "Browser subscriptions, and APNs devices (--apns-devices), each sent one message.")
    var count: Int = 100_000

    @Option(
        name: .customLong("apns-devices"),
        help: "APNs devices of the APNs broadcast (default: --count; 0 skips it)."
    )
    var apnsDevices: Int?

    @Option(
        name: .customLong("webpush-workers"),
        help: """
            Threads of the Web Push simulator that verify VAPID and decrypt (default: 2 with \
            --webpush-decrypt-every 1, else 0).
            """
    )
    var webPushWorkers: Int?

    @Option(
        name: .customLong("webpush-decrypt-every"),
        help: """
            The Web Push simulator decrypts every Nth message (1: every message, and every VAPID signature \
            verified).
            """
    )
    var webPushDecryptEvery: Int = 100

    @Option(
        name: .customLong("simulator-binary"),
        help: "The pushgate executable that runs the Web Push simulator (default: --pushgate-binary's)."
    )
    var simulatorBinary: String?

    var simulatorWorkers: Int { webPushWorkers ?? (webPushDecryptEvery == 1 ? 2 : 0) }

    @Option(
        name: .customLong("webpush-connections"),
        help: "app.default.webpush.pool.maxConnectionsPerOrigin of the gateway."
    )
    var webPushConnections: Int = 8

    @Option(name: .customLong("poll-ms"), help: "How often the simulators' counts are read, in milliseconds.")
    var pollMilliseconds: Int = 10

    func validate() throws {
        guard count >= 1, (apnsDevices ?? 0) >= 0 else { throw ValidationError("--count must be at least 1") }
        guard (0...64).contains(simulatorWorkers) else { throw ValidationError("--webpush-workers must be 0...64") }
        guard webPushDecryptEvery >= 1 else { throw ValidationError("--webpush-decrypt-every must be at least 1") }
        guard webPushConnections >= 1 else { throw ValidationError("--webpush-connections must be at least 1") }
        guard (1...1_000).contains(pollMilliseconds) else { throw ValidationError("--poll-ms must be 1...1000") }
        if gateway.apnsHost != nil { throw ValidationError("webpush-gateway runs our simulators: no --apns-host") }
    }

    func run() async throws {
        ChildProcesses.installSignalHandlers()
        let report = Report(json: false)
        do {
            try await WebPushGatewayBenchmark(command: self, report: report).run()
        } catch let error as BenchError {
            report.line("pushgate-bench webpush-gateway: \(error.description)")
            throw ExitCode.failure
        }
    }
}

/// One broadcast of the run, as its simulator and the gateway's /proc saw it.
struct GatewayBroadcastRun: Sendable {
    var service: String
    var devices: Int
    var share: ServiceRun
    var secondsToDoneLine: Double?
    var accepted: Int?
    var failed: Int?
    var gatewayCPU: CPUTime?
    var standInCPU: CPUTime?
    var otherMachineCPUSeconds: Double?
    var loadAverage: String?
    /// What the stand-in checked with cryptography, when it says.
    var checked: String?

    var line: String {
        var line = "  \(service): \(Format.integer(devices)) messages"
        if let seconds = share.secondsToCount {
            line += " in \(Format.milliseconds(seconds)) = \(Format.integer(Double(devices) / seconds)) messages/s"
        } else {
            line += ", NOT all answered"
        }
        line += "; gateway CPU \(gatewayCPU.map(Format.cpu) ?? "?")"
        if let cpu = gatewayCPU { line += " = \(Format.micro(cpu.total / Double(devices) * 1e6)) µs/message" }
        if let cpu = standInCPU {
            line += "; its simulator \(Format.micro(cpu.total / Double(devices) * 1e6)) µs/message"
        }
        if let other = otherMachineCPUSeconds { line += "; other CPU \(Format.seconds(other)) s" }
        line += "; gateway accepted \(accepted.map(Format.integer) ?? "?"), failed \(failed.map(Format.integer) ?? "?")"
        if let distinct = share.distinctDevices, let duplicates = share.duplicates {
            line += "; distinct \(Format.integer(distinct)), duplicates \(Format.integer(duplicates))"
        }
        if let checked { line += "; \(checked)" }
        line += "; load average \(loadAverage ?? "?")"
        return line
    }
}

struct WebPushGatewayBenchmark {
    static let apnsGroup = "apns"
    static let webPushGroup = "webpush"
    static let payload = #"{"title":"Goal!","body":"Lyon 2 - 1","team":"Lyon"}"#

    let command: WebPushGatewayCommand
    let report: Report

    var apnsDevices: Int { command.apnsDevices ?? command.count }

    static func datagram(group: String) -> [UInt8] {
        Array(#"{"groups":["\#(group)"],"type":"urgent","payload":\#(payload)}"#.utf8)
    }

    func run() async throws {
        let options = command.gateway
        let binary = try options.binary()
        let work = try options.makeWorkDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        let apnsKey = try ThrowawayKey.make()
        let apnsKeyPath = try apnsKey.write(in: work)
        let vapidKey = VAPIDKey.generate()
        let vapidKeyPath = work.appendingPathComponent("vapid.pem").path
        guard
            FileManager.default.createFile(
                atPath: vapidKeyPath,
                contents: Data(vapidKey.pemRepresentation.utf8),
                attributes: [.posixPermissions: 0o600]
            )
        else { throw BenchError("cannot write the VAPID key to \(vapidKeyPath)") }

        report.line(
            "pushgate-bench webpush-gateway: \(Format.integer(apnsDevices)) APNs devices and "
                + "\(Format.integer(command.count)) browsers on one origin, one broadcast each, one gateway"
        )
        report.line(
            "  machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(FileSystem.loadAverage() ?? "?") at start"
        )
        report.line("  encryption: \(try WebPushEncryptionCost.measure().line)")

        try await StandIn.with(options: options, workDirectory: work, keyPath: apnsKeyPath) { apns in
            try await WebPushStandIn.with(
                options: options,
                binary: command.simulatorBinary,
                workers: command.simulatorWorkers,
                decryptEvery: command.webPushDecryptEvery
            ) { webPush in
                report.line("  Web Push stand-in: \(webPush.description)")
                let made = ContinuousClock.now
                let subscriptions = try webPush.createSubscriptions(
                    count: command.count,
                    applicationServerKey: vapidKey.publicKeyBase64URL
                )
                report.line(
                    "  subscriptions: \(Format.integer(subscriptions.count)) made by the simulator in "
                        + "\(Format.seconds((ContinuousClock.now - made).seconds)) s"
                )
                let database = work.appendingPathComponent("webpush-gateway.db").path
                let fill = try await StoreFill.fill(
                    path: database,
                    groups: [
                        (Self.apnsGroup, try (0..<apnsDevices).map(BenchDevices.token)),
                        (Self.webPushGroup, subscriptions),
                    ]
                )
                report.line(
                    "  fill: \(Format.integer(fill.devices)) devices in \(Format.seconds(fill.seconds)) s "
                        + "(SQLiteStore.register(batch:), as e2e)"
                )
                let launch = GatewayLaunch(
                    binary: binary,
                    databasePath: database,
                    apnsHost: apns.authority,
                    caPath: apns.caPath,
                    authKeyPath: apnsKeyPath,
                    topic: options.topic,
                    extraArguments: webPush.gatewayArguments(
                        vapidKeyPath: vapidKeyPath,
                        connections: command.webPushConnections
                    ) + options.gatewayArguments
                )
                report.line("  gateway: \(binary) \(launch.arguments.joined(separator: " "))")
                let gateway = try GatewayProcess.start(launch)
                do {
                    let ports = try await gateway.waitForReady(timeout: 60)
                    var runs: [GatewayBroadcastRun] = []
                    if apnsDevices > 0 {
                        await options.waitForQuietMachine(report: report)
                        runs.append(
                            try await broadcast(
                                service: .apns,
                                devices: apnsDevices,
                                group: Self.apnsGroup,
                                gateway: gateway,
                                port: ports.notification,
                                doneLines: runs.count + 1,
                                standInCPU: apns.standInCPU,
                                answered: {
                                    let stats = try ControlAPI.stats(port: apns.controlPort ?? 0)
                                    return (stats.accepted + stats.rejected, nil, nil)
                                }
                            )
                        )
                    }
                    await options.waitForQuietMachine(report: report)
                    runs.append(
                        try await broadcast(
                            service: .webPush,
                            devices: command.count,
                            group: Self.webPushGroup,
                            gateway: gateway,
                            port: ports.notification,
                            doneLines: runs.count + 1,
                            standInCPU: webPush.cpu,
                            checked: {
                                guard let stats = try? webPush.stats() else { return nil }
                                return "its simulator decrypted \(Format.integer(stats.decrypted)), verified "
                                    + "\(Format.integer(stats.tokensVerified)) VAPID signature(s)"
                            },
                            answered: {
                                let stats = try webPush.stats()
                                return (stats.answered, stats.subscriptionsDelivered, stats.duplicates)
                            }
                        )
                    )
                    await gateway.stop()
                    report.line("results (release build; CPU read from /proc of each process):")
                    for run in runs { report.line(run.line) }
                } catch {
                    await gateway.stop()
                    throw error
                }
            }
        }
    }

    /// Sends one notification request to `group` and waits for its simulator to have answered
    /// `devices` messages and for the gateway's `doneLines`-th done line.
    private func broadcast(
        service: ServiceRun.Service,
        devices: Int,
        group: String,
        gateway: GatewayProcess,
        port: Int,
        doneLines: Int,
        standInCPU: () -> CPUTime?,
        checked: () -> String? = { nil },
        answered: @escaping () throws -> (answered: Int, distinct: Int?, duplicates: Int?)
    ) async throws -> GatewayBroadcastRun {
        let options = command.gateway
        let sender = try DatagramSender()
        let machineBefore = ProcessMetrics.machineCPU()
        let ownBefore = ProcessMetrics.selfCPU()
        let standInBefore = standInCPU()
        let gatewayBefore = gateway.cpu()
        let start = ContinuousClock.now
        guard sender.send(Self.datagram(group: group), port: port) else {
            throw BenchError("sendto failed for the notification datagram")
        }
        let deadline = start + .seconds(options.timeout)
        var shares = try await ServiceWatch.poll(
            [ServiceWatch(service: service, devices: devices) { try answered().answered }],
            start: start,
            deadline: deadline,
            interval: .milliseconds(command.pollMilliseconds),
            checkAlive: { try gateway.checkAlive("during the broadcast") }
        )
        var run = GatewayBroadcastRun(service: service.rawValue, devices: devices, share: shares.removeFirst())
        let remaining = max(1, (deadline - ContinuousClock.now).seconds)
        if let done = try await gateway.waitForLines(
            containing: "notification request ",
            count: doneLines,
            timeout: remaining
        )?.last {
            run.secondsToDoneLine = (done.arrivedAt - start).seconds
            run.accepted = done.metadata("push.accepted").flatMap(Int.init)
            run.failed = done.metadata("push.failed").flatMap(Int.init)
        }
        let gatewayAfter = gateway.cpu()
        let standInAfter = standInCPU()
        let ownAfter = ProcessMetrics.selfCPU()
        let machineAfter = ProcessMetrics.machineCPU()
        if let before = gatewayBefore, let after = gatewayAfter { run.gatewayCPU = after - before }
        if let before = standInBefore, let after = standInAfter { run.standInCPU = after - before }
        if let before = machineBefore, let after = machineAfter {
            let ours = (run.gatewayCPU?.total ?? 0) + (run.standInCPU?.total ?? 0) + (ownAfter - ownBefore).total
            run.otherMachineCPUSeconds = max(0, (after.busy - before.busy) - ours)
        }
        if let counts = try? answered() {
            run.share.distinctDevices = counts.distinct
            run.share.duplicates = counts.duplicates
        }
        run.loadAverage = FileSystem.loadAverage()
        run.checked = checked()
        return run
    }
}

/// The encryption of one Web Push message (a fresh key, ECDH, HKDF, AES-GCM) on one thread: CPU per
/// message, measured in this process with the benchmark's payload, so that it can be read apart from
/// the gateway's CPU per message.
struct WebPushEncryptionCost {
    var microseconds: Double
    var messages: Int

    var line: String {
        "\(Format.micro(microseconds)) µs of CPU per message on one thread (WebPushEncryption.encrypt, "
            + "\(Format.integer(messages)) messages of the broadcast's payload)"
    }

    /// Nothing else of this process runs meanwhile: its CPU is the encryption's.
    static func measure(messages: Int = 3_000) throws -> WebPushEncryptionCost {
        let browser = try MicroCase.makeWebPushSubscription()
        let plaintext = Array(WebPushGatewayBenchmark.payload.utf8)
        for _ in 0..<200 { _ = try? WebPushEncryption.encrypt(plaintext, for: browser) }
        let before = ProcessMetrics.selfCPU()
        for _ in 0..<messages { _ = try? WebPushEncryption.encrypt(plaintext, for: browser) }
        let cpu = ProcessMetrics.selfCPU() - before
        return WebPushEncryptionCost(microseconds: cpu.total / Double(messages) * 1e6, messages: messages)
    }
}
