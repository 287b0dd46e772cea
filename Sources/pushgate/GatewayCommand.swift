import ArgumentParser

/// The daemon. Filled in by the gateway issue; for now it only reserves the default subcommand.
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "gateway", abstract: "Run the gateway daemon (default).")

    func run() async throws {
        throw ValidationError("the gateway daemon is not built yet; use `pushgate simulate` or `pushgate send`")
    }
}
