public import Foundation

/// How close a credential (a certificate) is to its expiry, and what to say when that changes. Pure: the
/// expiries and the time in, the stages reached out.
///
/// An operator hears once per stage: 30 days left, 7 days, 1 day, expired; a credential renewed (a
/// later expiry after a reload) starts again from the stage its new expiry is in, without a line for
/// stages that improved.
public struct CredentialExpiryTracker: Sendable {
    public enum Stage: Int, Comparable, Sendable, CustomStringConvertible {
        case fine = 0
        case within30Days
        case within7Days
        case within1Day
        case expired

        public static func < (lhs: Stage, rhs: Stage) -> Bool { lhs.rawValue < rhs.rawValue }

        public init(expiry: Date, now: Date) {
            let left = expiry.timeIntervalSince(now)
            self =
                switch left {
                case ..<0: .expired
                case ..<86_400: .within1Day
                case ..<(7 * 86_400): .within7Days
                case ..<(30 * 86_400): .within30Days
                default: .fine
                }
        }

        public var description: String {
            switch self {
            case .fine: "more than 30 days left"
            case .within30Days: "less than 30 days left"
            case .within7Days: "less than 7 days left"
            case .within1Day: "less than a day left"
            case .expired: "expired"
            }
        }
    }

    /// A credential: the app it belongs to ("" for the gateway's own, such as the HTTP API's certificate)
    /// and its kind (`apns_certificate`, `http_tls_certificate`).
    public struct Credential: Hashable, Sendable, CustomStringConvertible {
        public var app: String
        public var kind: String

        public init(app: String, kind: String) {
            self.app = app
            self.kind = kind
        }

        public var description: String { app.isEmpty ? kind : "app \(app) \(kind)" }
    }

    /// A stage newly reached: what to log.
    public struct Change: Hashable, Sendable {
        public var credential: Credential
        public var stage: Stage
        public var expiry: Date
    }

    private var stages: [Credential: (stage: Stage, expiry: Date)] = [:]

    public init() {}

    /// Records the current expiries; answers the credentials whose stage got worse (or that are seen for
    /// the first time in a stage other than fine).
    public mutating func check(_ expiries: [Credential: Date], now: Date) -> [Change] {
        var changes: [Change] = []
        for (credential, expiry) in expiries.sorted(by: { $0.key.description < $1.key.description }) {
            let stage = Stage(expiry: expiry, now: now)
            let previous = stages[credential]
            let renewed = previous.map { expiry > $0.expiry } ?? false
            stages[credential] = (stage, expiry)
            if stage > .fine, previous == nil || renewed || stage > previous!.stage {
                changes.append(Change(credential: credential, stage: stage, expiry: expiry))
            }
        }
        return changes
    }

    /// The credentials whose last check found them expired.
    public var expired: [(credential: Credential, expiry: Date)] {
        stages.filter { $0.value.stage == .expired }.map { ($0.key, $0.value.expiry) }
            .sorted { $0.credential.description < $1.credential.description }
    }
}
