import CoreMetrics
import Foundation
import Logging
import PushgateCore
import ServiceLifecycle
import Synchronization

/// Watches the expiry of every credential that has one (the apps' APNs client certificates, the HTTP API's
/// certificate): `pushgate_credential_expiry_timestamp_seconds{app,kind}`, a warning at 30, 7 and 1 days
/// left and an error once expired (``CredentialExpiryTracker``), and the expired ones named on `/readyz`.
/// Checks at start, every `interval`, and on every reload (a renewed certificate is seen at once).
final class CredentialExpiryWatch: Service, Sendable {
    typealias Credential = CredentialExpiryTracker.Credential

    private let sources: [(credential: Credential, expiry: @Sendable () -> Date?)]
    private let tracker = Mutex(CredentialExpiryTracker())
    private let gauges: [Credential: CoreMetrics.Gauge]
    private let clock: any WallClock
    private let logger: Logger
    private let interval: Duration

    init(
        sources: [(credential: Credential, expiry: @Sendable () -> Date?)],
        clock: any WallClock,
        metricsFactory: any MetricsFactory,
        logger: Logger,
        interval: Duration = .seconds(3_600)
    ) {
        self.sources = sources
        self.clock = clock
        self.logger = logger
        self.interval = interval
        var gauges: [Credential: CoreMetrics.Gauge] = [:]
        for source in sources {
            gauges[source.credential] = CoreMetrics.Gauge(
                label: "pushgate_credential_expiry_timestamp_seconds",
                dimensions: [("app", source.credential.app), ("kind", source.credential.kind)],
                factory: metricsFactory
            )
        }
        self.gauges = gauges
    }

    var isEmpty: Bool { sources.isEmpty }

    /// Reads every expiry now, records the gauges and logs the stages newly reached.
    func check() {
        var expiries: [Credential: Date] = [:]
        for source in sources {
            guard let expiry = source.expiry() else { continue }
            expiries[source.credential] = expiry
            gauges[source.credential]?.record(expiry.timeIntervalSince1970)
        }
        let now = clock.now()
        let changes = tracker.withLock { $0.check(expiries, now: now) }
        for change in changes {
            let metadata: Logger.Metadata = [
                "push.credential": "\(change.credential)",
                "push.expiry": "\(change.expiry.formatted(.iso8601))",
            ]
            if change.stage == .expired {
                logger.error("a credential has expired: renew it and reload (SIGHUP)", metadata: metadata)
            } else {
                logger.warning("a credential expires soon (\(change.stage)): renew it", metadata: metadata)
            }
        }
    }

    /// For `/readyz`: one line per expired credential.
    var expiredSummaries: [String] {
        tracker.withLock { $0.expired }.map { "\($0.credential) expired on \($0.expiry.formatted(.iso8601))" }
    }

    func run() async throws {
        while !Task.isCancelled {
            check()
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: self.interval) }
            } catch {
                return
            }
        }
    }
}
