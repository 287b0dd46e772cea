import Crypto
import Foundation
import PushgateConfig

/// A fresh folder for configuration files, removed when released.
final class ConfigFolder {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// Writes `text` to `name` in the folder and returns its path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        let path = url.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// Loads with no environment unless given: the test machine's PUSHGATE_* must not leak in.
func load(
    file: String? = nil,
    environment: [String: String] = [:],
    flags: [String: (String, String)] = [:],
    appFlags: [String: (String, String)] = [:],
    arguments: [String] = []
) async throws(ConfigurationProblem) -> GatewayConfiguration {
    var commandLine = ConfigurationLoader.CommandLine(configFile: file)
    for (key, (value, flag)) in flags { commandLine.values[key] = .init(value, flag: flag) }
    for (key, (value, flag)) in appFlags { commandLine.appValues[key] = .init(value, flag: flag) }
    commandLine.arguments = arguments
    return try await ConfigurationLoader(commandLine: commandLine, environment: environment).load()
}

/// The problem `body` throws, or nil.
func problem(_ body: () async throws(ConfigurationProblem) -> Void) async -> ConfigurationProblem? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}

/// The repository's root, from this file's path.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// A file of two apps: `news`, a certificate app whose last lines are `service` (a service's block, its
/// lines indented as under `news:`), and `weather` without one.
func newsAndWeatherFile(news service: String) -> String {
    """
    apps: [news, weather]
    app:
      news:
        topic: com.example.news
        certificate:
          file: /etc/news.crt
    \(service)
      weather:
        topic: com.example.weather
        certificate:
          file: /etc/weather.crt
    """
}

/// One certificate app, `news`, with what `configure` adds (a service's route): what a validation test
/// breaks one value of.
func newsCertificateApp(_ configure: (inout GatewayConfiguration.App) -> Void) -> GatewayConfiguration {
    var configuration = GatewayConfiguration()
    var news = GatewayConfiguration.App(name: "news", authentication: .certificate(file: "news.crt", key: nil))
    news.topic = "com.example.news"
    configure(&news)
    configuration.apps = [news]
    return configuration
}

/// One token app, `news` (a fresh P-256 key written to `folder`, so no certificate is needed), with what
/// `configure` adds: for tests that load credentials.
func newsTokenApp(
    _ folder: ConfigFolder,
    _ configure: (inout GatewayConfiguration.App) throws -> Void
) throws -> GatewayConfiguration {
    var configuration = GatewayConfiguration()
    let key = try folder.write("auth.p8", P256.Signing.PrivateKey().pemRepresentation)
    var app = GatewayConfiguration.App(
        name: "news",
        authentication: .token(keyFile: key, keyID: "KEY1234567", teamID: "TEAM123456")
    )
    app.topic = "com.example.news"
    try configure(&app)
    configuration.apps = [app]
    return configuration
}
