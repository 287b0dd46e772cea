import Crypto
import Foundation
import PushgateConfig
import PushgateCore
import PushgateDispatch
import PushgateGateway
import PushgatePostgres
import PushgateUDP
import Testing

/// `pushgate` and the tests build the gateway with one function, `Gateway.Configuration(_:)`: what
/// `main` used to set on its own (receive buffer, store selection, PostgreSQL's password, chunk size and
/// lease) is a field of `GatewayConfiguration` that the builder applies.
@Suite("One composition: main and the tests build the gateway alike")
struct GatewayCompositionTests {
    /// One token app with a real key file (the builder reads it) and whatever `change` sets.
    private static func configuration(
        in directory: TemporaryDirectory,
        _ change: (inout GatewayConfiguration) -> Void = { _ in }
    ) throws -> GatewayConfiguration {
        let keyFile = directory.path("AuthKey.p8")
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyFile))
        var configuration = GatewayConfiguration()
        configuration.store.path = directory.path("gateway.db")
        var app = GatewayConfiguration.App(
            name: Registration.defaultApp,
            authentication: .token(keyFile: keyFile, keyID: "KEY1234567", teamID: "TEAM123456")
        )
        app.topic = "com.example.pushgate"
        configuration.apps = [app]
        change(&configuration)
        return configuration
    }

    private static func postgres(_ configuration: Gateway.Configuration) -> PostgresStore.Configuration? {
        guard case .postgres(let postgres) = configuration.store else { return nil }
        return postgres
    }

    @Test("the builder asks for the daemon's 64 MiB UDP receive buffer, not the ingress's own default")
    func receiveBuffer() throws {
        let directory = try TemporaryDirectory()
        let built = try Gateway.Configuration(Self.configuration(in: directory), environment: [:])
        #expect(built.udp.receiveBufferBytes == 64 << 20)
        #expect(built.udp.receiveBufferBytes != UDPIngress.Configuration().receiveBufferBytes)
        let smaller = try Gateway.Configuration(
            Self.configuration(in: directory) { $0.udp.receiveBufferBytes = 1 << 20 },
            environment: [:]
        )
        #expect(smaller.udp.receiveBufferBytes == 1 << 20)
    }

    @Test("store.url selects PostgreSQL with its own chunk size, lease and a per-process instance id")
    func postgresDefaults() throws {
        let directory = try TemporaryDirectory()
        let sqlite = try Gateway.Configuration(Self.configuration(in: directory), environment: [:])
        #expect(Self.postgres(sqlite) == nil)
        #expect(sqlite.databasePath == directory.path("gateway.db"))
        #expect(sqlite.dispatcher.instanceID == InstanceID("local"))

        let built = try Gateway.Configuration(
            Self.configuration(in: directory) { $0.store.url = "postgres://pushgate@127.0.0.1:5432/db" },
            environment: [:]
        )
        let postgres = try #require(Self.postgres(built))
        #expect(postgres.host == "127.0.0.1")
        #expect(postgres.password == nil)
        #expect(built.dispatcher.chunkSize == PostgresStore.defaultChunkSize)
        #expect(built.dispatcher.leaseDuration == PostgresStore.defaultLeaseDuration)
        #expect(built.dispatcher.instanceID != InstanceID("local"))
    }

    @Test("chunk size and lease set in the configuration win over the store's defaults, with either store")
    func chunkSizeAndLease() throws {
        let directory = try TemporaryDirectory()
        for url in [nil, "postgres://pushgate@127.0.0.1:5432/db"] {
            let built = try Gateway.Configuration(
                Self.configuration(in: directory) {
                    $0.store.url = url
                    $0.store.chunkSize = 500
                    $0.store.lease = .seconds(40)
                },
                environment: [:]
            )
            #expect(built.dispatcher.chunkSize == 500, "\(url ?? "sqlite")")
            #expect(built.dispatcher.leaseDuration == .seconds(40), "\(url ?? "sqlite")")
        }
    }

    @Test("PostgreSQL's password: the password file's first line, else PUSHGATE_STORE_PASSWORD, else the URL's")
    func password() throws {
        let directory = try TemporaryDirectory()
        let file = directory.path("password")
        try Data("from-file\nignored\n".utf8).write(to: URL(fileURLWithPath: file))
        let url = "postgres://pushgate:from-url@127.0.0.1:5432/db"
        let environment = [GatewayConfiguration.storePasswordVariable: "from-env"]
        func password(file: String?, environment: [String: String]) throws -> String? {
            let configuration = try Self.configuration(in: directory) {
                $0.store.url = url
                $0.store.passwordFile = file
            }
            return Self.postgres(try Gateway.Configuration(configuration, environment: environment))?.password
        }
        #expect(try password(file: file, environment: environment) == "from-file")
        #expect(try password(file: nil, environment: environment) == "from-env")
        #expect(try password(file: nil, environment: [:]) == "from-url")
    }

    @Test("a store the builder cannot use stops start-up with a problem naming the flag that set it")
    func storeProblems() throws {
        let directory = try TemporaryDirectory()
        var configuration = try Self.configuration(in: directory) { $0.store.url = "postgres://127.0.0.1/db" }
        configuration.flagNames["store.url"] = "--store"
        #expect(throws: ConfigurationProblem.self) { try Gateway.Configuration(configuration, environment: [:]) }
        do {
            _ = try Gateway.Configuration(configuration, environment: [:])
        } catch {
            #expect(error.key == "--store")
            #expect(error.message.contains("no user"), "\(error.message)")
        }
        configuration.store.url = "postgres://pushgate@127.0.0.1/db"
        configuration.store.passwordFile = directory.path("missing")
        #expect(throws: ConfigurationProblem(key: "store.passwordFile", "cannot read \(directory.path("missing"))")) {
            try Gateway.Configuration(configuration, environment: [:])
        }
        configuration.store.url = nil
        #expect(throws: ConfigurationProblem(key: "store.passwordFile", "needs --store (or store.url)")) {
            try Gateway.Configuration(configuration, environment: [:])
        }
        configuration.store.passwordFile = nil
        configuration.store.lease = .seconds(2)
        #expect(throws: ConfigurationProblem(key: "store.lease", "at least 3 seconds")) {
            try Gateway.Configuration(configuration, environment: [:])
        }
    }

    @Test("GatewayFixture runs the gateway the builder makes: main's receive buffer, main's instance id rules")
    func fixtureUsesTheBuilder() async throws {
        try await GatewayFixture.with { context in
            #expect(context.configuration.udp.receiveBufferBytes == GatewayConfiguration.UDP().receiveBufferBytes)
            #expect(context.configuration.instanceIDIsDefault == false)
            #expect(context.configuration.dispatcher.instanceID == InstanceID("test"))
            #expect(context.configuration.http == nil, "http.port -1 turns the API off")
            #expect(context.configuration.databasePath.hasSuffix("gateway.db"))
        }
    }
}
