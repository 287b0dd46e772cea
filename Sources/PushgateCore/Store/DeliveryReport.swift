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
        skipped: Int = 0
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
    }
}
