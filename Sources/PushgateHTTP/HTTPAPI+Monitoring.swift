public import CoreMetrics

extension HTTPAPI {
    /// What the API reports about itself and the gateway around it: its request metrics, the `/metrics`
    /// exposition and the APNs and FCM halves of `/readyz`. The API does not know the APNs client or the metrics
    /// backend; the gateway hands them in as values and closures.
    public struct Monitoring: Sendable {
        /// Where the request metrics (`pushgate_http_requests_total`, `..._duration_seconds`) go. The
        /// default records nothing.
        public var metricsFactory: any MetricsFactory
        /// The text `GET /metrics` answers (Prometheus exposition format). Nil: the route answers 404.
        public var metricsExposition: (@Sendable () async -> [UInt8])?
        /// The APNs half of readiness: true when at least one APNs connection is possible. `/readyz`
        /// answers 503 `apns_unavailable` while it is false.
        public var apnsReachable: @Sendable () async -> Bool
        /// The FCM half of readiness: true when no app has FCM configured, or at least one FCM
        /// connection is possible. `/readyz` answers 503 `fcm_unavailable` while it is false.
        public var fcmReachable: @Sendable () async -> Bool
        /// The dispatcher's half of readiness: false while its store operations fail. `/readyz`
        /// answers 503 `store_unavailable` while it is false.
        public var dispatcherReady: @Sendable () async -> Bool
        /// The configuration alarms in force, one line each naming the app, the service and the likely cause
        /// (most of an app's answers refuse its device tokens: a wrong environment, topic or Firebase
        /// project). `/readyz` answers 503 `configuration_alarm` while there is any.
        public var configurationAlarms: @Sendable () async -> [String]
        /// How long `/readyz` waits for the store's answer before it says 503 `store_unavailable`: promptly,
        /// even when the database went silent (its queries end only at the store's own deadline, 30 s by
        /// default), but not so soon that a store merely slow under load is called unavailable.
        public var readinessStoreDeadline: Duration
        /// The disk-space half of readiness: nil while the store's volume has room, else why not.
        /// `/readyz` answers 503 `disk_low` with that sentence while it is not nil.
        public var diskSpaceProblem: @Sendable () async -> String?

        public init(
            metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance,
            metricsExposition: (@Sendable () async -> [UInt8])? = nil,
            apnsReachable: @escaping @Sendable () async -> Bool = { true },
            fcmReachable: @escaping @Sendable () async -> Bool = { true },
            dispatcherReady: @escaping @Sendable () async -> Bool = { true },
            configurationAlarms: @escaping @Sendable () async -> [String] = { [] },
            readinessStoreDeadline: Duration = .seconds(10),
            diskSpaceProblem: @escaping @Sendable () async -> String? = { nil }
        ) {
            self.metricsFactory = metricsFactory
            self.metricsExposition = metricsExposition
            self.apnsReachable = apnsReachable
            self.fcmReachable = fcmReachable
            self.dispatcherReady = dispatcherReady
            self.configurationAlarms = configurationAlarms
            self.readinessStoreDeadline = readinessStoreDeadline
            self.diskSpaceProblem = diskSpaceProblem
        }
    }
}
