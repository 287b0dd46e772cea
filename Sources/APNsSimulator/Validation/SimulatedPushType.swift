/// The `apns-push-type` values Apple documents, with the suffix each requires on `apns-topic`
/// ("Sending notification requests to APNs").
enum SimulatedPushType: String, CaseIterable, Sendable {
    case alert
    case background
    case location
    case voip
    case complication
    case fileprovider
    case mdm
    case liveactivity
    case pushtotalk
    case widgets
    case controls

    /// The suffix Apple requires after the bundle ID in `apns-topic`; empty for the bundle ID itself.
    var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: return ""
        case .location: return ".location-query"
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .liveactivity: return ".push-type.liveactivity"
        case .pushtotalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        case .controls: return ".push-type.controls"
        }
    }

    /// Apple: "The maximum size for a VoIP notification is 5 KB (5120 bytes)"; 4 KB for the others.
    var maximumPayloadBytes: Int {
        self == .voip ? 5120 : 4096
    }

    /// Apple documents `location` pushes as token-based authentication only.
    var requiresTokenAuthentication: Bool {
        self == .location
    }

    /// All non-empty topic suffixes, longest first (so `.voip-ptt` is tried before `.voip`).
    static let knownSuffixes: [String] = Self.allCases.map(\.topicSuffix).filter { !$0.isEmpty }
        .sorted { $0.count > $1.count }
}
