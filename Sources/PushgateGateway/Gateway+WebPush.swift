import Logging
public import PushgateConfig
public import WebPushTransport

extension Gateway {
    /// The Web Push client of one app: its VAPID key and subject, its pools (one per push service).
    static func makeWebPushClient(_ configuration: WebPushClient.Configuration, app: String) throws -> WebPushClient {
        var logger = Logger(label: "pushgate.webpush")
        logger[metadataKey: "push.app"] = "\(app)"
        do {
            return try WebPushClient(configuration: configuration, logger: logger)
        } catch {
            // The error names the setting (a cap, the CA file), never key material.
            throw StartupError(description: "app.\(app).webpush: \(error)")
        }
    }
}

extension WebPushClient.Configuration {
    /// The Web Push client a loaded `app.NAME.webpush.*` describes.
    public init(_ loaded: LoadedWebPush) {
        self.init(vapidKey: loaded.vapidKey, subject: loaded.subject, trustRoots: loaded.trustRoots)
        maximumConnectionsPerOrigin = loaded.maximumConnectionsPerOrigin
        maximumConnections = loaded.maximumConnections
    }
}
