import Foundation

extension GatewayConfiguration {
    /// The environment variable that holds PostgreSQL's password when no password file is named.
    public static let storePasswordVariable = "PUSHGATE_STORE_PASSWORD"

    /// PostgreSQL's password, from, in order, the first line of `store.passwordFile`
    /// (`--store-password-file`) or `PUSHGATE_STORE_PASSWORD`. nil: the URL's, if it has one (or no
    /// PostgreSQL store at all).
    public func loadStorePassword(environment: [String: String]) throws(ConfigurationProblem) -> String? {
        guard store.url != nil else { return nil }
        guard let path = store.passwordFile else { return environment[Self.storePasswordVariable] }
        guard let contents = try? String(contentsOfFile: path, encoding: .utf8) else {
            let key = flagNames["store.passwordFile"] ?? "store.passwordFile"
            throw ConfigurationProblem(key: key, "cannot read \(path)")
        }
        return String(contents.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
    }
}
