public import Foundation

/// One device joining one group of one app: what a registration datagram or an HTTP register call says.
///
/// The app name scopes everything: a token registered for two apps is two devices, and a group name means
/// a different group in each app. An app implies its APNs environment (production or sandbox), so
/// "invalid for that environment" is "invalid for that app". The single-app command line uses
/// ``Registration/defaultApp``.
public struct Registration: Hashable, Sendable {
    /// The app name the single-app (pushd-compatible) command line uses.
    public static let defaultApp = "default"

    public var app: String
    public var token: DeviceToken
    public var group: String
    /// When the registration was received. It becomes the device's `lastRegisteredAt` (and its
    /// `registeredAt` when the device is new or was invalid), which decides whether a later 410 with an
    /// older Apple timestamp still invalidates it.
    public var at: Date

    public init(app: String = Registration.defaultApp, token: DeviceToken, group: String, at: Date) {
        self.app = app
        self.token = token
        self.group = group
        self.at = at
    }
}

/// What a registration changed.
public enum RegistrationResult: String, Hashable, Sendable, CustomStringConvertible {
    /// The device was not known for this app: it was created, valid, as a member of the group.
    case created
    /// The device was known and valid; it joined a group it was not in.
    case joinedGroup = "joined_group"
    /// The device was known, valid and already in the group: nothing changed but `lastRegisteredAt`.
    case alreadyMember = "already_member"
    /// The device was known but invalid (Apple had said it was dead); it is valid again, with a new
    /// `registeredAt`, and is a member of the group.
    case revalidated

    public var description: String { rawValue }
}

/// Whether fan-out sends to a device.
public enum DeviceState: String, Hashable, Sendable, CustomStringConvertible {
    case valid
    /// Apple said the token is dead (410 `Unregistered`/`ExpiredToken`, or `BadDeviceToken`) for this
    /// app's environment. Fan-out skips it; registering it again makes it valid.
    case invalid

    public var description: String { rawValue }
}

/// Everything the registry knows about one device of one app.
public struct DeviceRecord: Hashable, Sendable {
    public var app: String
    public var token: DeviceToken
    public var state: DeviceState
    /// The groups the device belongs to, sorted by name. An invalid device keeps its memberships, so that
    /// registering it again restores them; fan-out skips it while it is invalid.
    public var groups: [String]
    /// When the device was created, or made valid again after an invalidation.
    public var registeredAt: Date
    /// The latest registration of this device (any group). 410 compares Apple's timestamp with this.
    public var lastRegisteredAt: Date
    public var invalidatedAt: Date?
    public var invalidReason: APNsReason?

    public init(
        app: String,
        token: DeviceToken,
        state: DeviceState,
        groups: [String],
        registeredAt: Date,
        lastRegisteredAt: Date,
        invalidatedAt: Date? = nil,
        invalidReason: APNsReason? = nil
    ) {
        self.app = app
        self.token = token
        self.state = state
        self.groups = groups
        self.registeredAt = registeredAt
        self.lastRegisteredAt = lastRegisteredAt
        self.invalidatedAt = invalidatedAt
        self.invalidReason = invalidReason
    }
}

/// What an invalidation did.
public enum InvalidationResult: Hashable, Sendable, CustomStringConvertible {
    /// The device was valid and is now invalid.
    case invalidated
    /// The device was already invalid; nothing changed.
    case alreadyInvalid
    /// Apple's timestamp is older than the device's latest registration: the app registered the token
    /// again after Apple saw it die, so it stays valid.
    case keptBecauseRegisteredLater(lastRegisteredAt: Date)
    /// No such device for this app (it may have been removed); nothing changed.
    case unknownDevice

    public var description: String {
        switch self {
        case .invalidated: "invalidated"
        case .alreadyInvalid: "already_invalid"
        case .keptBecauseRegisteredLater: "kept_registered_later"
        case .unknownDevice: "unknown_device"
        }
    }
}

/// Apple's word that a token is dead, as the dispatcher hands it to the store.
public struct DeviceInvalidation: Hashable, Sendable {
    public var token: DeviceToken
    /// `.unregistered`, `.expiredToken` or `.badDeviceToken`.
    public var reason: APNsReason
    /// The 410 answer's `timestamp`; nil for `BadDeviceToken`, which invalidates unconditionally.
    public var appleTimestamp: Date?

    public init(token: DeviceToken, reason: APNsReason, appleTimestamp: Date?) {
        self.token = token
        self.reason = reason
        self.appleTimestamp = appleTimestamp
    }
}

/// One device in a group listing.
public struct GroupMember: Hashable, Sendable {
    public var token: DeviceToken
    public var state: DeviceState
    public var registeredAt: Date

    public init(token: DeviceToken, state: DeviceState, registeredAt: Date) {
        self.token = token
        self.state = state
        self.registeredAt = registeredAt
    }
}

/// Where a group listing continues. Opaque: pass the `next` of one page as the `after` of the next call.
///
/// Pages are in a stable order that does not depend on what is registered meanwhile: a device that joins
/// while a client pages through appears at most once (on a later page if at all), and no device present
/// for the whole listing is skipped.
public struct GroupCursor: Hashable, Sendable, CustomStringConvertible {
    public let value: String

    public init(_ value: String) { self.value = value }

    public var description: String { value }
}

/// A page of a group listing.
public struct GroupPage: Hashable, Sendable {
    public var devices: [GroupMember]
    /// Nil on the last page.
    public var next: GroupCursor?

    public init(devices: [GroupMember], next: GroupCursor?) {
        self.devices = devices
        self.next = next
    }
}
