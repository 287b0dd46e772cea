import PushgateCore

/// The apps an API serves, in configuration order.
package struct AppNames: Sendable {
    let all: [String]
    private let set: Set<String>

    package init(_ names: [String]) {
        self.all = names
        self.set = Set(names)
    }

    /// The app a request means when it names none: the only one, if exactly one is served.
    var implicit: String? { all.count == 1 ? all[0] : nil }

    func contains(_ name: String) -> Bool { set.contains(name) }

    /// The app of a request body that names `app` (nil: names none): a served one (else `unknown_app`),
    /// or the only one when it names none (else `missing_field`).
    func resolve(_ app: String?) throws(ValidationError) -> String {
        if let app {
            guard contains(app) else { throw Self.unknown(app) }
            return app
        }
        guard let implicit else { throw RequestDocument.missing("app") }
        return implicit
    }

    static func unknown(_ app: String, field: String = "app") -> ValidationError {
        ValidationError(code: .unknownApp, field: field, message: "no app named \"\(app.prefix(64))\" is served here")
    }
}
