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
