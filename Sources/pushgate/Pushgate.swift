import ArgumentParser

/// `pushgate`: the gateway (default), the APNs simulator, and a one-shot sender.
@main
struct Pushgate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushgate",
        abstract: "A push-notification gateway for APNs, compatible with the C pushd.",
        version: BuildCommit.versionLine,
        subcommands: [GatewayCommand.self, SimulateCommand.self, SendCommand.self, WebPushCommand.self],
        defaultSubcommand: GatewayCommand.self
    )
}
