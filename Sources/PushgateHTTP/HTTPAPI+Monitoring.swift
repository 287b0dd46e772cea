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
        /// The disk-space half of readiness: nil while the store's volume has room, else why not.
        /// `/readyz` answers 503 `disk_low` with that sentence while it is not nil.
        public var diskSpaceProblem: @Sendable () async -> String?

        public init(
            metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance,
            metricsExposition: (@Sendable () async -> [UInt8])? = nil,
            apnsReachable: @escaping @Sendable () async -> Bool = { true },
            fcmReachable: @escaping @Sendable () async -> Bool = { true },
            dispatcherReady: @escaping @Sendable () async -> Bool = { true },
            diskSpaceProblem: @escaping @Sendable () async -> String? = { nil }
        ) {
            self.metricsFactory = metricsFactory
            self.metricsExposition = metricsExposition
            self.apnsReachable = apnsReachable
            self.fcmReachable = fcmReachable
            self.dispatcherReady = dispatcherReady
            self.diskSpaceProblem = diskSpaceProblem
        }
    }
}
