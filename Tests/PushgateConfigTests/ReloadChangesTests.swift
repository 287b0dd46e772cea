import PushgateConfig
import PushgateCore
import Testing

/// What a reload (SIGHUP) may apply and what needs a restart, judged on the values alone.
@Suite("Reload: changes that need a restart")
struct ReloadChangesTests {
    static func configuration() -> GatewayConfiguration {
        var configuration = GatewayConfiguration()
        configuration.listen = "0.0.0.0"
        configuration.apiKeys = [.init(name: "ops", source: .file("/etc/pushgate/keys"))]
        var news = GatewayConfiguration.App(
            name: "news",
            authentication: .certificate(file: "/etc/pushgate/news.pem", key: "/etc/pushgate/news.key")
        )
        news.topic = "com.example.news"
        news.fcm = .init(serviceAccountFile: "/etc/pushgate/news-fcm.json")
        var weather = GatewayConfiguration.App(
            name: "weather",
            authentication: .token(keyFile: "/etc/pushgate/AuthKey.p8", keyID: "KEY1234567", teamID: "TEAM123456")
        )
        weather.topic = "com.example.weather"
        configuration.apps = [news, weather]
        return configuration
    }

    @Test func credentialsAndAPIKeysChangeWithoutARestart() {
        let running = Self.configuration()
        var fresh = running
        fresh.apiKeys = [
            .init(name: "ops", source: .file("/etc/pushgate/keys.new")),
            .init(name: "ci", source: .hash("sha256:" + String(repeating: "ab", count: 32)), app: "news"),
        ]
        fresh.apps[0].authentication = .pkcs12(file: "/etc/pushgate/news.p12", passphraseEnvironment: "NEWS_P12")
        fresh.apps[0].fcm?.serviceAccountFile = "/etc/pushgate/news-fcm-2026.json"
        fresh.apps[1].authentication = .token(
            keyFile: "/etc/pushgate/AuthKey2.p8",
            keyID: "KEY7654321",
            teamID: "TEAM123456"
        )
        #expect(running.changesNeedingRestart(to: fresh).isEmpty)
        #expect(running.changesNeedingRestart(to: running).isEmpty)
    }

    @Test func portsStoreAppsTopicsAndEndpointsNeedARestart() {
        let running = Self.configuration()
        var fresh = running
        fresh.udp.registrationPort = 9000
        fresh.http.port = 9001
        fresh.store.path = "/var/lib/pushgate/other.db"
        fresh.logLevel = "debug"
        fresh.apps[0].topic = "com.example.other"
        fresh.apps[0].environment = .sandbox
        fresh.apps[0].pool.maximumConnections = 2
        fresh.apps[0].fcm?.host = "127.0.0.1:8443"
        fresh.apps[1].apnsHost = "127.0.0.1:2197"
        #expect(
            running.changesNeedingRestart(to: fresh) == [
                "udp.registrationPort", "http.port", "store.path", "logLevel", "app.news.topic",
                "app.news.environment", "app.news.pool", "app.news.fcm.host", "app.weather.apnsHost",
            ]
        )
    }

    @Test func addingOrRemovingAnAppOrAnFCMRouteOrTurningAPIKeysOnOrOffNeedsARestart() {
        let running = Self.configuration()
        var fewer = running
        fewer.apps.removeLast()
        fewer.apps[0].fcm = nil
        fewer.apiKeys = []
        #expect(running.changesNeedingRestart(to: fewer) == ["apiKeys", "apps", "app.news.fcm"])
    }

    @Test func aLegacyAppKeepsItsCertificateUntilARestart() {
        var running = Self.configuration()
        running.apps[0].transport = .legacy
        var fresh = running
        fresh.apps[0].authentication = .certificate(file: "/etc/pushgate/news-2027.pem", key: nil)
        #expect(running.changesNeedingRestart(to: fresh) == ["app.news.certificate"])
    }
}
