/// The apps an API serves, in configuration order.
struct AppNames: Sendable {
    let all: [String]
    private let set: Set<String>

    init(_ names: [String]) {
        self.all = names
        self.set = Set(names)
    }

    /// The app a request means when it names none: the only one, if exactly one is served.
    var implicit: String? { all.count == 1 ? all[0] : nil }

    func contains(_ name: String) -> Bool { set.contains(name) }
}
