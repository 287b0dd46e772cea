import ArgumentParser

struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "simulate", abstract: "Run the APNs simulator.")
    func run() async throws {}
}
