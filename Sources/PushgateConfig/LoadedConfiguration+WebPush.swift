import Foundation
public import PushTransport
public import WebPush

/// An app's Web Push route, its files read and checked: the VAPID key parsed (it stays inside
/// ``VAPIDKey``, whose description shows only the public key), the subject and the trust roots.
public struct LoadedWebPush: Sendable {
    public var vapidKey: VAPIDKey
    public var subject: VAPIDSubject
    public var trustRoots: TrustRoots
    public var maximumConnectionsPerOrigin: Int
    public var maximumConnections: Int
}

extension GatewayConfiguration.App.WebPush {
    /// Reads the key file and checks the CA file. `fail` takes the key below `app.NAME.webpush.`.
    /// Problems name the file, never the key material.
    func load(fail: (String, String) -> ConfigurationProblem) throws(ConfigurationProblem) -> LoadedWebPush {
        guard FileManager.default.isReadableFile(atPath: vapidKeyFile) else {
            throw fail("vapidKey", "cannot read \(vapidKeyFile)")
        }
        let key: VAPIDKey
        do {
            key = try VAPIDKey(contentsOfFile: vapidKeyFile)
        } catch {
            throw fail("vapidKey", "\(vapidKeyFile): \(error.description)")
        }
        let subject: VAPIDSubject
        do { subject = try VAPIDSubject(self.subject, field: "subject") } catch { throw fail("subject", error.message) }
        return LoadedWebPush(
            vapidKey: key,
            subject: subject,
            trustRoots: try TrustRoots.loading(caFile: caFile, fail: fail),
            maximumConnectionsPerOrigin: maximumConnectionsPerOrigin,
            maximumConnections: maximumConnections
        )
    }
}
