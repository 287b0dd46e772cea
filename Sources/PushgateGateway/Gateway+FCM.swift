public import FCMTransport
import Logging
public import PushgateConfig

extension Gateway {
    /// The FCM client of one app: its own connections, its own access token (one per service account).
    static func makeFCMClient(_ configuration: FCMClient.Configuration, app: String) throws -> FCMClient {
        // The error names the field (token_uri, the CA file), never key material.
        try makeClient(label: "pushgate.fcm", route: "fcm", app: app) { logger in
            try FCMClient(configuration: configuration, logger: logger)
        }
    }

    /// An app's client of one service, logging with the app's name; a failure stops start-up naming the
    /// app's route (`app.NAME.fcm: …`).
    static func makeClient<Client>(
        label: String,
        route: String,
        app: String,
        _ make: (Logger) throws -> Client
    ) throws -> Client {
        var logger = Logger(label: label)
        logger[metadataKey: "push.app"] = "\(app)"
        do {
            return try make(logger)
        } catch {
            throw StartupError(description: "app.\(app).\(route): \(error)")
        }
    }
}

extension Gateway {
    /// For `/readyz`: one line per app whose FCM credentials the token endpoint refuses.
    static func fcmCredentialAlarms(_ clients: [(app: String, client: FCMClient)]) -> [String] {
        clients.compactMap { entry in entry.client.credentialAlarm.map { "app \(entry.app) (fcm): \($0)" } }
    }
}

extension FCMClient.Configuration {
    /// The FCM client a loaded `app.NAME.fcm.*` describes.
    public init(_ loaded: LoadedFCM) {
        self.init(
            serviceAccount: loaded.serviceAccount,
            host: loaded.endpoint.host,
            port: loaded.endpoint.port,
            tokenURI: loaded.tokenURI,
            trustRoots: loaded.trustRoots
        )
        maxConnections = loaded.maximumConnections
        maxStreams = loaded.maximumStreams
    }
}
