import Foundation
public import PushTransport
public import PushgateCore

/// An app's FCM route, its files read and checked: the service account parsed (its private key stays
/// inside ``FCMServiceAccount``), the endpoint and trust roots resolved.
public struct LoadedFCM: Sendable {
    public var serviceAccount: FCMServiceAccount
    /// `messages:send`'s host and port (fcm.googleapis.com:443 unless `fcm.host` says otherwise).
    public var endpoint: Endpoint
    /// `fcm.tokenUri`: replaces the account file's `token_uri`; nil: the file's.
    public var tokenURI: String?
    public var trustRoots: TrustRoots
    public var maximumConnections: Int
    public var maximumStreams: Int?

    /// Google's FCM endpoint.
    public static let googleEndpoint = Endpoint(host: "fcm.googleapis.com", port: 443)
}

extension GatewayConfiguration.App.FCM {
    /// Reads the service-account file and the CA file. `fail` takes the key below `app.NAME.fcm.`.
    /// Problems name the file and the field at fault, never the key material.
    func load(fail: (String, String) -> ConfigurationProblem) throws(ConfigurationProblem) -> LoadedFCM {
        guard FileManager.default.isReadableFile(atPath: serviceAccountFile) else {
            throw fail("serviceAccount", "cannot read \(serviceAccountFile)")
        }
        let account: FCMServiceAccount
        do {
            account = try FCMServiceAccount(contentsOfFile: serviceAccountFile)
        } catch {
            throw fail("serviceAccount", "\(serviceAccountFile): \(error.description)")
        }
        var endpoint = LoadedFCM.googleEndpoint
        if let host {
            // validate() parsed it already.
            do { endpoint = try Endpoint(parsing: host) } catch { throw fail("host", error.message) }
        }
        return LoadedFCM(
            serviceAccount: account,
            endpoint: endpoint,
            tokenURI: tokenURI,
            trustRoots: try TrustRoots.loading(caFile: caFile, fail: fail),
            maximumConnections: maximumConnections,
            maximumStreams: maximumStreams
        )
    }
}

extension TrustRoots {
    /// A route's `ca` (a CA file, PEM, that must be readable) or the system store. `fail` takes the key
    /// below the route (`ca`).
    static func loading(
        caFile: String?,
        fail: (String, String) -> ConfigurationProblem
    ) throws(ConfigurationProblem) -> TrustRoots {
        guard let caFile else { return .system }
        guard FileManager.default.isReadableFile(atPath: caFile) else { throw fail("ca", "cannot read \(caFile)") }
        return .caFile(caFile)
    }
}
