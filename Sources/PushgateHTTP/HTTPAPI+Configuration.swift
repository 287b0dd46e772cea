public import PushgateCore

extension HTTPAPI {
    /// Where the API listens and what it serves. Defaults inline; `validate()` runs in `HTTPAPI.init`.
    public struct Configuration: Sendable {
        /// The address to bind. Loopback by default: API keys (a later step) are needed beyond it.
        public var host: String
        /// The TCP port; 0 asks the system for a free one (see `HTTPAPI`'s `onBound`).
        public var port: Int
        /// The apps this API serves, by name. With exactly one, the routes without `/apps/{app}` exist too
        /// and a notification body may leave out `app`.
        public var apps: [String]
        /// The largest request body accepted; larger ones get 413 `body_too_large`.
        public var maximumBodyBytes: Int
        /// Bearer keys for everything under `/v1` (empty: no keys, and the API must stay on loopback).
        public var apiKeys: [APIKey] = []
        /// Serve over TLS with this context (nil: plain HTTP). The gateway reloads it on SIGHUP; new
        /// connections use whatever it holds when they are accepted.
        public var tls: ReloadableTLSContext? = nil

        public static let defaultPort = 7880
        public static let defaultMaximumBodyBytes = 64 * 1024

        public init(
            host: String = "127.0.0.1",
            port: Int = Configuration.defaultPort,
            apps: [String] = [Registration.defaultApp],
            maximumBodyBytes: Int = Configuration.defaultMaximumBodyBytes
        ) {
            self.host = host
            self.port = port
            self.apps = apps
            self.maximumBodyBytes = maximumBodyBytes
        }

        /// Checks the values, throwing an error that names the key.
        public func validate() throws(HTTPAPIConfigurationError) {
            guard (0...65535).contains(port) else {
                throw HTTPAPIConfigurationError(key: "port", message: "must be 0 to 65535 (got \(port))")
            }
            guard !host.isEmpty else { throw HTTPAPIConfigurationError(key: "host", message: "must not be empty") }
            guard !apps.isEmpty else {
                throw HTTPAPIConfigurationError(key: "apps", message: "the API needs at least one app")
            }
            var seen = Set<String>()
            for app in apps {
                guard !app.isEmpty else {
                    throw HTTPAPIConfigurationError(key: "apps", message: "app names must not be empty")
                }
                guard seen.insert(app).inserted else {
                    throw HTTPAPIConfigurationError(key: "apps", message: "app \"\(app)\" is listed twice")
                }
            }
            for key in apiKeys {
                guard key.sha256.count == 32 else {
                    throw HTTPAPIConfigurationError(key: "apiKeys", message: "a key hash must be 32 bytes")
                }
                if let app = key.app, !seen.contains(app) {
                    throw HTTPAPIConfigurationError(
                        key: "apiKeys",
                        message: "a key is limited to app \"\(app)\", which is not served"
                    )
                }
            }
            guard maximumBodyBytes >= 1024 else {
                throw HTTPAPIConfigurationError(
                    key: "maximumBodyBytes",
                    message: "must be at least 1024 (got \(maximumBodyBytes))"
                )
            }
        }
    }
}

/// A configuration value the HTTP API cannot start with.
public struct HTTPAPIConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The configuration key at fault.
    public let key: String
    public let message: String

    public init(key: String, message: String) {
        self.key = key
        self.message = message
    }

    public var description: String { "http.\(key): \(message)" }
}
