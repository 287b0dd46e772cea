import ArgumentParser

/// `pushgate-bench micro`: the per-request and per-device pieces of pushgate, each timed alone. Every
/// case calls the code the gateway runs (reached through `package` access), never a copy of it.
struct MicroCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "micro",
        abstract: "Micro-benchmarks of the real code: operations/s and CPU per operation, one line per case.",
        discussion: """
            Each case is prepared and checked first (its output decoded, its answers counted), warmed up \
            for a tenth of --seconds, then run for --seconds. CPU is this thread's (every case runs on it). \
            Figures mean something only from a release build: swift build -c release --product pushgate-bench.
            """
    )

    @Option(help: "Seconds each case is measured for (after a warm-up of a tenth of that).")
    var seconds: Double = 2

    @Option(help: "Cases to run, comma-separated, in the order given (default: all; see --list).")
    var cases: String?

    @Flag(help: "List the cases and what one operation of each is, then exit.")
    var list = false

    func validate() throws {
        guard seconds.isFinite, (0.001...600).contains(seconds) else {
            throw ValidationError("--seconds must be between 0.001 and 600")
        }
        _ = try selectedCases()
    }

    /// The cases `--cases` names, in its order; all of them without it.
    func selectedCases() throws -> [MicroCase] {
        guard let cases else { return MicroCase.all }
        let names = cases.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard !names.isEmpty, !names.contains(where: \.isEmpty) else {
            throw ValidationError("--cases takes case names, comma-separated (see --list)")
        }
        var selected: [MicroCase] = []
        for name in names {
            guard let found = MicroCase.all.first(where: { $0.name == name }) else {
                let known = MicroCase.all.map(\.name).joined(separator: ", ")
                throw ValidationError("--cases: no case named '\(name)' (cases: \(known))")
            }
            if !selected.contains(where: { $0.name == name }) { selected.append(found) }
        }
        return selected
    }

    func run() throws {
        let selected = try selectedCases()
        if list {
            for benchmark in selected { print(MicroReport.listing(benchmark)) }
            return
        }
        print(MicroReport.header(seconds: seconds))
        for benchmark in selected {
            let workload: MicroWorkload
            do {
                workload = try benchmark.prepare()
            } catch {
                print("pushgate-bench micro: \(benchmark.name) failed its check: \(error)")
                throw ExitCode.failure
            }
            let result = try MicroMeasurement.run(workload, seconds: seconds)
            print(MicroReport.line(benchmark, result))
        }
    }
}
