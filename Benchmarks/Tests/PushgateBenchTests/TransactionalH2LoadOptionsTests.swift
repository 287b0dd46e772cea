import Testing

@testable import pushgate_bench

/// `pushgate-bench transactional --http --h2load --h2load-pipeline N`: what it parses and the h2load command
/// it runs. No timing here.
@Suite struct TransactionalH2LoadOptionsTests {
    @Test("--h2load-pipeline is 1 by default and becomes h2load's -m; --rps is the rate shared by the connections")
    func pipelineIsH2LoadsM() throws {
        #expect(try TransactionalCommand.parse(["--http", "--h2load"]).h2loadPipeline == 1)
        let command = try TransactionalCommand.parse([
            "--http", "--h2load", "--h2load-pipeline", "8", "--rate", "10000",
        ])
        let arguments = TransactionalH2Load.arguments(
            port: 7880,
            connections: command.clients,
            pipeline: command.h2loadPipeline,
            rate: command.rate,
            seconds: 4.2,
            bodyPath: "/tmp/body.json"
        )
        func value(after flag: String) -> String? { arguments.firstIndex(of: flag).map { arguments[$0 + 1] } }
        #expect(value(after: "-c") == "32")
        #expect(value(after: "-m") == "8")
        #expect(value(after: "--rps") == "312.500")
        #expect(value(after: "-D") == "5")
        #expect(arguments.first == "--h1")
        #expect(arguments.last == "http://127.0.0.1:7880/v1/notifications")
    }

    @Test("--h2load-pipeline outside 1...256, or without --h2load, is refused")
    func refusesBadPipelines() {
        #expect(throws: (any Error).self) {
            try TransactionalCommand.parse(["--http", "--h2load", "--h2load-pipeline", "0"])
        }
        #expect(throws: (any Error).self) {
            try TransactionalCommand.parse(["--http", "--h2load", "--h2load-pipeline", "257"])
        }
        #expect(throws: (any Error).self) { try TransactionalCommand.parse(["--http", "--h2load-pipeline", "4"]) }
    }
}
