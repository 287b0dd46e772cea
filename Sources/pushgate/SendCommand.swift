import ArgumentParser

struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "send", abstract: "Send one notification and print APNs' answer.")
    func run() async throws {}
}
