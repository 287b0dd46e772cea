/// How a request's group names split into the groups it targets and the groups that never had a
/// registration (pushd compatibility: a notification to several groups reaches the groups that exist).
public struct TargetGroups: Hashable, Sendable {
    /// The ids of the target groups that exist, ascending.
    public var ids: [Int64]
    /// The names of the groups the app does not have, in the request's order, each once.
    public var unknown: [String]

    public init(ids: [Int64], unknown: [String]) {
        self.ids = ids
        self.unknown = unknown
    }

    /// Splits `groups` (distinct names) by `known` (name to id, for the names that exist). Throws
    /// ``StoreError/Code/unknownGroup`` only when every group is unknown and the request names no device:
    /// such a request could never reach anyone.
    public static func resolve(
        app: String,
        groups: [String],
        known: [String: Int64],
        hasDevices: Bool
    ) throws(StoreError) -> TargetGroups {
        var ids = [Int64]()
        var unknown = [String]()
        for name in groups {
            if let id = known[name] { ids.append(id) } else { unknown.append(name) }
        }
        if ids.isEmpty, !hasDevices, let first = unknown.first {
            throw StoreError.unknownGroup(app: app, group: first)
        }
        return TargetGroups(ids: ids.sorted(), unknown: unknown)
    }
}
