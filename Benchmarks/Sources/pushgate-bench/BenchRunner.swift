/// Runs the configurations a mode asks for, in order, and hands each result to the report.
struct BenchRunner {
    let mode: BenchCommand.Mode
    let options: BenchOptions
    let report: Report

    func run() async throws {
        report.header(mode: mode, options: options)
        var clientResults: [ClientRunResult] = []
        var h2loadResults: [H2LoadRunResult] = []

        if mode == .client || mode == .all {
            let key = try ThrowawayKey.make()
            let setup = SimulatorSetup(
                threads: options.simulatorThreads,
                tokenKey: key,
                maxConcurrentStreams: options.maxConcurrentStreams
            )
            for connections in options.connections {
                for run in 1...options.repetitions {
                    await waitForQuietMachine()
                    let result = try await BenchTargets.with(options: options, setup: setup) { target in
                        try await ClientBenchmark.run(
                            options: options,
                            connections: connections,
                            target: target,
                            key: key
                        )
                    }
                    report.clientRun(result, run: run, of: options.repetitions)
                    clientResults.append(result)
                }
            }
        }

        if mode == .h2load || mode == .all {
            if H2LoadBenchmark.isInstalled(options.h2loadPath) {
                // h2load sends no credentials: a simulator without token keys or client CA.
                let setup = SimulatorSetup(
                    threads: options.simulatorThreads,
                    tokenKey: nil,
                    maxConcurrentStreams: options.maxConcurrentStreams
                )
                for connections in options.connections {
                    for run in 1...options.repetitions {
                        await waitForQuietMachine()
                        let result = try await BenchTargets.with(options: options, setup: setup) { target in
                            try await H2LoadBenchmark.run(options: options, connections: connections, target: target)
                        }
                        report.h2loadRun(result, run: run, of: options.repetitions)
                        h2loadResults.append(result)
                    }
                }
            } else {
                report.line(
                    "h2load: not installed at \(options.h2loadPath), skipped (Debian: apt-get install nghttp2-client)"
                )
            }
        }

        report.summary(mode: mode, options: options, client: clientResults, h2load: h2loadResults)
    }

    private func waitForQuietMachine() async {
        guard options.quietWait > 0 else { return }
        let busy = await ProcessMetrics.waitForQuietMachine(
            threshold: options.quietThreshold,
            limit: Double(options.quietWait)
        )
        if let busy, busy > options.quietThreshold {
            report.line(
                "note: the machine was still \(Format.percent(busy)) busy after waiting \(options.quietWait) s; running anyway (see 'other CPU')"
            )
        }
    }
}
