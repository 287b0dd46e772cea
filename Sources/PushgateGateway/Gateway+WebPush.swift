public import PushgateConfig
public import WebPushTransport

extension Gateway {
    /// The Web Push client of one app: its VAPID key and subject, its pools (one per push service).
    static func makeWebPushClient(
        _ configuration: WebPushClient.Configuration,
        app: String,
        metrics: WebPushClientMetrics
    ) throws -> WebPushClient {
        // The error names the setting (a cap), never key material.
        try makeClient(label: "pushgate.webpush", route: "webpush", app: app) { logger in
            try WebPushClient(configuration: configuration, logger: logger, metrics: metrics)
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
