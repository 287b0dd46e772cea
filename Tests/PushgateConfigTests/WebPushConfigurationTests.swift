import Crypto
import Foundation
import PushgateConfig
import PushgateCore
import Testing

/// `app.NAME.webpush.*`: an app's VAPID key pair, contact and pool caps beside its APNs credentials.
@Suite("Web Push configuration: keys, validation, the VAPID key file")
struct WebPushConfigurationTests {
    static let file = newsAndWeatherFile(
        news: """
                webpush:
                  vapidKey: /etc/news-vapid.pem
                  subject: mailto:ops@example.com
                  ca: /etc/push-ca.pem
                  pool:
                    maxConnectionsPerOrigin: 2
                    maxConnections: 40
            """
    )

    @Test("the file's app.NAME.webpush.* keys give the app a Web Push route; defaults for the pool; none without them")
    func fromFile() async throws {
        let folder = try ConfigFolder()
        let configuration = try await load(file: try folder.write("pushgate.yaml", Self.file))
        let webPush = try #require(configuration.apps[0].webPush)
        #expect(webPush.vapidKeyFile == "/etc/news-vapid.pem")
        #expect(webPush.subject == "mailto:ops@example.com")
        #expect(webPush.caFile == "/etc/push-ca.pem")
        #expect(webPush.maximumConnectionsPerOrigin == 2)
        #expect(webPush.maximumConnections == 40)
        #expect(configuration.apps[1].webPush == nil)
        let defaults = GatewayConfiguration.App.WebPush(vapidKeyFile: "k.pem", subject: "mailto:a@b.c")
        #expect(defaults.maximumConnectionsPerOrigin == 8 && defaults.maximumConnections == 256)
    }

    @Test("a webpush.* key without vapidKey or without subject stops start-up, naming the key")
    func keyAndSubjectRequired() async {
        let noKey = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_APP_DEFAULT_WEBPUSH_SUBJECT": "mailto:a@example.com"])
        }
        #expect(noKey?.key == "app.default.webpush.subject")
        #expect(noKey?.message.contains("needs app.default.webpush.vapidKey") == true)
        let noSubject = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_APP_DEFAULT_WEBPUSH_VAPID_KEY": "/tmp/v.pem"])
        }
        #expect(noSubject?.message.contains("needs app.default.webpush.subject") == true)
    }

    static var valid: GatewayConfiguration {
        newsCertificateApp { $0.webPush = .init(vapidKeyFile: "vapid.pem", subject: "https://example.com/contact") }
    }

    /// (what breaks it, the one line expected)
    static let cases: [(String, @Sendable (inout GatewayConfiguration) -> Void, String)] = [
        ("empty key", { $0.apps[0].webPush?.vapidKeyFile = "" }, "app.news.webpush.vapidKey: must not be empty"),
        (
            "subject", { $0.apps[0].webPush?.subject = "ops@example.com" },
            "app.news.webpush.subject: "
        ),
        ("empty CA", { $0.apps[0].webPush?.caFile = "" }, "app.news.webpush.ca: must not be empty"),
        (
            "no connections per origin", { $0.apps[0].webPush?.maximumConnectionsPerOrigin = 0 },
            "app.news.webpush.pool.maxConnectionsPerOrigin: must be at least 1"
        ),
        (
            "fewer in all than per origin", { $0.apps[0].webPush?.maximumConnections = 4 },
            "app.news.webpush.pool.maxConnections: must be at least pool.maxConnectionsPerOrigin (8)"
        ),
        (
            "Web Push-only app", { $0.apps[0].authentication = nil },
            "app.news.certificate.file: no APNs credentials: an app with webpush.* needs APNs credentials too "
                + "(Web Push-only apps are not supported)"
        ),
    ]

    @Test("each broken Web Push value stops start-up with one line naming its key", arguments: cases.indices)
    func failure(_ index: Int) throws {
        try Self.valid.validate()
        let (what, breakIt, expected) = Self.cases[index]
        var configuration = Self.valid
        breakIt(&configuration)
        do {
            try configuration.validate()
            Issue.record("\(what) passed")
        } catch {
            #expect(error.description.hasPrefix(expected), "\(what): \(error)")
        }
    }

    @Test("the VAPID key is read at start-up (the public key shown, never the private one); a bad file names the key")
    func loadsTheKey() throws {
        let folder = try ConfigFolder()
        let vapid = P256.Signing.PrivateKey()
        let keyFile = try folder.write("vapid.pem", vapid.pemRepresentation)
        var configuration = try newsTokenApp(folder) {
            $0.webPush = .init(vapidKeyFile: keyFile, subject: "mailto:ops@example.com")
        }
        let loaded = try #require(try configuration.loadCredentials(environment: [:]).apps[0].webPush)
        #expect(loaded.vapidKey.publicKey.rawRepresentation == vapid.publicKey.rawRepresentation)
        #expect(loaded.subject.description == "mailto:ops@example.com")
        #expect(!"\(loaded.vapidKey)".contains(vapid.pemRepresentation))
        guard case .system = loaded.trustRoots else {
            Issue.record("push services are checked against the system store")
            return
        }

        configuration.apps[0].webPush?.vapidKeyFile = try folder.write("bad.pem", "not a key")
        do {
            _ = try configuration.loadCredentials(environment: [:])
            Issue.record("a file that is not a key passed")
        } catch {
            #expect(error.key == "app.news.webpush.vapidKey")
        }
    }

    @Test(
        "a reload applies a new VAPID key file or subject; the CA, the pool caps and adding or removing the route need a restart"
    )
    func reload() {
        var reloadable = Self.valid
        reloadable.apps[0].webPush?.subject = "mailto:other@example.com"
        reloadable.apps[0].webPush?.vapidKeyFile = "/elsewhere/vapid.pem"
        #expect(Self.valid.changesNeedingRestart(to: reloadable).isEmpty)
        var fixed = Self.valid
        fixed.apps[0].webPush?.caFile = "/etc/ssl/other.pem"
        fixed.apps[0].webPush?.maximumConnectionsPerOrigin = 2
        fixed.apps[0].webPush?.maximumConnections = 9
        #expect(
            Self.valid.changesNeedingRestart(to: fixed) == [
                "app.news.webpush.ca", "app.news.webpush.pool.maxConnectionsPerOrigin",
                "app.news.webpush.pool.maxConnections",
            ]
        )
        var removed = Self.valid
        removed.apps[0].webPush = nil
        #expect(Self.valid.changesNeedingRestart(to: removed) == ["app.news.webpush"])
        #expect(Self.valid.changesNeedingRestart(to: Self.valid).isEmpty)
    }
}
