public import Foundation

/// Where a notification request stands.
public enum RequestState: String, Hashable, Sendable, CustomStringConvertible {
    /// Stored, no chunk cut yet.
    case queued
    /// Being fanned out or retried.
    case sending
    /// Every target has an outcome (accepted or failed), or was skipped, and no retry is pending.
    case done
    /// Its expiration passed with work left: pending retries were recorded as failed ("expired"), and so
    /// were the targets not yet sent (counted, without a row per device).
    case expired

    public var isFinished: Bool { self == .done || self == .expired }
    public var description: String { rawValue }
}

/// The delivery report of one notification request.
public struct DeliveryReport: Hashable, Sendable {
    public var id: RequestID
    public var app: String
    public var state: RequestState
    /// Distinct targets counted when the request was stored (``EnqueueResult/targetCount``).
    public var targets: Int
    /// Devices APNs accepted.
    public var accepted: Int
    /// Devices that failed for good, by reason (APNs reason, transport label, or "expired").
    public var failedByReason: [String: Int]
    /// Targets invalidated after the request was stored and before fan-out read them: they got nothing,
    /// on purpose. A finished request has `targets = accepted + failed + skipped`.
    public var skipped: Int
    /// Devices waiting for another attempt.
    public var pendingRetries: Int
    public var createdAt: Date
    /// When it became done or expired.
    public var finishedAt: Date?
    /// The `apns-id` of the latest accepted notification.
    public var lastAPNsID: String?
    /// Groups the request named that the app did not have when it was stored (they targeted nothing),
    /// in the request's order.
    public var unknownGroups: [String]
    /// Targets, accepted, failed and skipped by service (APNs, FCM, Web Push), each adding up to its total.
    /// nil for a request stored by a release before the split (its devices were not counted by service).
    public var byService: ServiceSplit?

    public var failed: Int { failedByReason.values.reduce(0, +) }

    public init(
        id: RequestID,
        app: String,
        state: RequestState,
        targets: Int,
        accepted: Int,
        failedByReason: [String: Int],
        pendingRetries: Int,
        createdAt: Date,
        finishedAt: Date?,
        lastAPNsID: String?,
        unknownGroups: [String] = [],
        skipped: Int = 0,
        byService: ServiceSplit? = nil
    ) {
        self.id = id
        self.app = app
        self.state = state
        self.targets = targets
        self.accepted = accepted
        self.failedByReason = failedByReason
        self.pendingRetries = pendingRetries
        self.createdAt = createdAt
        self.finishedAt = finishedAt
        self.lastAPNsID = lastAPNsID
        self.unknownGroups = unknownGroups
        self.skipped = skipped
        self.byService = byService
    }
}

/// A report's counts by service (``DeliveryReport/byService``).
public struct ServiceSplit: Hashable, Sendable {
    public var targets: ServiceCounts
    public var accepted: ServiceCounts
    public var failed: ServiceCounts
    public var skipped: ServiceCounts

    public init(targets: ServiceCounts, accepted: ServiceCounts, failed: ServiceCounts, skipped: ServiceCounts) {
        self.targets = targets
        self.accepted = accepted
        self.failed = failed
        self.skipped = skipped
    }

    /// The split as both stores read it: the totals, and the FCM and Web Push parts they keep (APNs is the
    /// rest). `targets` by service is counted when the request is stored (nil: stored before the split),
    /// accepted and skipped with each record. Failures: while the request is unfinished, its failure rows
    /// of each service (`failedRows`: one per device that failed for good); once finished, what is left of
    /// the service's targets after its accepted and skipped ones (an expired request's unsent targets
    /// have no rows, and a finished request has `targets = accepted + failed + skipped`).
    package static func read(
        finished: Bool,
        totals: (targets: Int, accepted: Int, failed: Int, skipped: Int),
        targets: (fcm: Int, webpush: Int)?,
        accepted: (fcm: Int, webpush: Int),
        skipped: (fcm: Int, webpush: Int),
        failedRows: (fcm: Int, webpush: Int)
    ) -> ServiceSplit? {
        guard let targets else { return nil }
        let failed =
            finished
            ? (
                fcm: targets.fcm - accepted.fcm - skipped.fcm,
                webpush: targets.webpush - accepted.webpush - skipped.webpush
            ) : failedRows
        return ServiceSplit(
            targets: ServiceCounts(total: totals.targets, fcm: targets.fcm, webpush: targets.webpush),
            accepted: ServiceCounts(total: totals.accepted, fcm: accepted.fcm, webpush: accepted.webpush),
            failed: ServiceCounts(total: totals.failed, fcm: failed.fcm, webpush: failed.webpush),
            skipped: ServiceCounts(total: totals.skipped, fcm: skipped.fcm, webpush: skipped.webpush)
        )
    }
}
