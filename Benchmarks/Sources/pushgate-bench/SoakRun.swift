import Foundation
import Synchronization

/// One soak: set-up, load with faults, drain, accounting, metrics. Returns whether it passed.
struct SoakRun {
    let command: SoakCommand
    let report: Report

    func run() async throws -> Bool {
        let options = command.gateway
        let binary = try options.binary()
        let work = try options.makeWorkDirectory()
        var passed = false
        defer {
            if command.keepWork || !passed {
                report.line("kept the store and the simulator's CA in \(work.path)")
            } else {
                try? FileManager.default.removeItem(at: work)
            }
        }
        let keyPath = try ThrowawayKey.make().write(in: work)
        let database = work.appendingPathComponent("soak.db").path
        let unregistered = unregisteredIndices()
        printHeader(binary: binary, work: work, unregistered: unregistered.count)

        let fill = try await StoreFill.fill(path: database, devices: command.devices, group: SoakLoad.group)
        report.line("fill: \(Format.integer(fill.devices)) devices in group \"\(SoakLoad.group)\"")
        if command.registryDevices > 0 {
            let registry = try await StoreFill.prefill(
                path: database,
                devices: command.registryDevices,
                group: SoakLoad.registryGroup
            )
            report.line(
                "fill: \(Format.integer(registry.created)) more devices (random tokens) in group "
                    + "\"\(SoakLoad.registryGroup)\", never notified, in \(Format.seconds(registry.seconds)) s; "
                    + "store \(Format.mebibytes(registry.bytes))"
            )
        }
        let simulator = try SimulatorProcess.start(binary: binary, arguments: simulatorArguments(work, keyPath))
        do {
            let port = try await simulator.waitForPort(timeout: 30)
            let controlPort = try await simulator.waitForControlPort(timeout: 30)
            for index in unregistered {
                _ = try ControlAPI.requestJSON(
                    port: controlPort,
                    method: "POST",
                    path: "/devices/\(BenchDevices.tokenHex(index))/unregister"
                )
            }
            let faults =
                #"{"rate_503":\#(command.rate503),"goaway_after_streams":\#(command.goAwayAfter),"#
                + #""latency_ms":\#(command.latencyMilliseconds)}"#
            _ = try ControlAPI.requestJSON(port: controlPort, method: "POST", path: "/faults", body: faults)
            passed = try await withGateway(
                binary: binary,
                database: database,
                keyPath: keyPath,
                standIn: StandIn(
                    host: "127.0.0.1",
                    port: port,
                    caPath: work.appendingPathComponent("simulator-ca.pem").path,
                    controlPort: controlPort,
                    processPID: simulator.pid
                ),
                unregistered: Set(unregistered)
            )
            await simulator.stop()
            return passed
        } catch {
            await simulator.stop()
            throw error
        }
    }

    /// Every `1 / share`-th device of the broadcast group.
    private func unregisteredIndices() -> [Int] {
        guard command.unregisteredShare > 0 else { return [] }
        let step = max(1, Int((1 / command.unregisteredShare).rounded()))
        return Array(stride(from: 0, to: command.devices, by: step))
    }

    private func simulatorArguments(_ work: URL, _ keyPath: String) -> [String] {
        [
            "simulate", "--accept-all", "--host", "127.0.0.1", "--port", "0", "--control-port", "0",
            "--threads", String(command.gateway.simulatorThreads), "--record-limit", "0", "--fcm-port=-1",
            "--environment", "production", "--max-concurrent-streams", String(command.gateway.maxConcurrentStreams),
            "--log-level", "warning", "--ca-out", work.appendingPathComponent("simulator-ca.pem").path,
            "--token-key", "\(ThrowawayKey.keyID):\(ThrowawayKey.teamID):\(keyPath)",
        ]
    }

    private func withGateway(
        binary: String,
        database: String,
        keyPath: String,
        standIn: StandIn,
        unregistered: Set<Int>
    ) async throws -> Bool {
        let gateway = try GatewayProcess.start(
            GatewayLaunch(
                binary: binary,
                databasePath: database,
                apnsHost: standIn.authority,
                caPath: standIn.caPath,
                authKeyPath: keyPath,
                topic: command.gateway.topic,
                extraArguments: command.gateway.gatewayArguments
            )
        )
        do {
            let ports = try await gateway.waitForReady(timeout: 60)
            let start = ContinuousClock.now
            let sampler = Mutex(
                SoakSampler(pid: gateway.pid, simulatorPID: standIn.processPID, databasePath: database, start: start)
            )
            let counters = SoakCounters()
            let load = SoakLoad(
                ports: ports,
                controlPort: standIn.controlPort!,
                counters: counters,
                broadcastEvery: command.broadcastEvery,
                singleEvery: command.singleEvery,
                registrationsPerSecond: command.registrationsPerSecond,
                registrationGroup: command.registrationGroup,
                dropEvery: command.dropEvery,
                burstEvery: command.burstEvery,
                burstSeconds: command.burstSeconds,
                burstRate: command.burstRate
            )
            let report = self.report
            let takeSample: @Sendable () -> Void = {
                let sample = sampler.withLock { $0.sample() }
                let sent = counters.now
                report.line(
                    SoakReport.sampleLine(sample)
                        + " | sent \(sent.broadcasts) broadcasts, \(sent.singles) singles, "
                        + "\(sent.registrations) registrations; "
                        + "finished \(gateway.log.count(containing: "push.targets="))"
                )
            }
            takeSample()
            let deadline = start + .seconds(command.minutes * 60)
            let watchdog = Task {
                while !Task.isCancelled {
                    try gateway.checkAlive("during the soak")
                    try await Task.sleep(for: .seconds(1))
                }
            }
            defer { watchdog.cancel() }
            try await load.run(until: deadline, sample: takeSample, sampleEvery: command.sampleEvery)
            let loadSeconds = (ContinuousClock.now - start).seconds
            let sent = counters.now
            let drained = try await drain(gateway, requests: sent.broadcasts + sent.singles)
            takeSample()
            let devices = SoakDeviceCheck.run(
                controlPort: standIn.controlPort!,
                devices: command.devices,
                unregistered: unregistered
            )
            let stats = (try? ControlAPI.getJSON(port: standIn.controlPort!, path: "/stats", timeoutSeconds: 30)) ?? [:]
            watchdog.cancel()
            await gateway.stop()
            let doneLines = gateway.log.lines(containing: "notification request ")
            let skippedInStore = try? SoakProbes.skippedInvalidated(
                databasePath: database,
                requestIDs: SoakAccounting.requestsWithSkippedTargets(doneLines)
            )
            let accounting = SoakAccounting(
                sent: sent,
                doneLines: doneLines,
                registrationGroup: command.registrationGroup,
                simulatorStats: stats,
                devices: devices,
                stoppedLine: gateway.log.lines(containing: "UDP ingress stopped").first,
                skippedInStore: skippedInStore
            )
            return SoakReport(report: report, command: command).finish(
                accounting: accounting,
                samples: sampler.withLock { $0.samples },
                loadSeconds: loadSeconds,
                drainSeconds: drained
            )
        } catch {
            await gateway.stop()
            throw error
        }
    }

    /// Waits until the gateway logged as many finished requests as were sent; the seconds it took,
    /// nil when it did not within --drain-seconds.
    private func drain(_ gateway: GatewayProcess, requests: Int) async throws -> Double? {
        let start = ContinuousClock.now
        let lines = try await gateway.waitForLines(
            containing: "push.targets=",
            count: requests,
            timeout: Double(command.drainSeconds)
        )
        return lines == nil ? nil : (ContinuousClock.now - start).seconds
    }

    private func printHeader(binary: String, work: URL, unregistered: Int) {
        let c = command
        report.line(
            "pushgate-bench soak: \(Format.seconds(c.minutes)) minutes of load, "
                + "warm-up \(Format.seconds(c.warmupSeconds / 60)) minutes"
        )
        report.line(
            "  gateway: \(binary) gateway -f -d <store> ... \(c.gateway.gatewayArguments.joined(separator: " "))"
        )
        report.line("  simulator: pushgate simulate (separate process, per-device tracking, --record-limit 0)")
        report.line(
            "  load: broadcast to \(Format.integer(c.devices)) devices every \(c.broadcastEvery) s; one registration "
                + "group (\(c.registrationGroup) devices) every \(c.singleEvery) s; \(c.registrationsPerSecond) "
                + "UDP registrations/s"
        )
        report.line(
            "  faults: rate_503 \(c.rate503); GOAWAY after \(c.goAwayAfter) streams; drop_now every \(c.dropEvery) s; "
                + "\(unregistered) devices (\(c.unregisteredShare)) 410 Unregistered; rate_429 \(c.burstRate) for "
                + "\(c.burstSeconds) s every \(c.burstEvery) s"
        )
        report.line("  store: \(work.path) (\(FileSystem.describe(work.path)))")
        report.line(
            "  machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, "
                + "load average \(FileSystem.loadAverage() ?? "?") at start"
        )
    }
}
