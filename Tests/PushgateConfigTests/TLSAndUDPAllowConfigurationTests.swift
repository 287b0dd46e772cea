import Foundation
import PushgateConfig
import PushgateCore
import Testing

@Suite("Configuration: http.tls.* and udp.allow")
struct TLSAndUDPAllowConfigurationTests {
    @Test("http.tls.* from the file, the environment or key flags (clientCA is --http-tls-client-ca)")
    func tlsKeys() async throws {
        let folder = try ConfigFolder()
        let file = try folder.write(
            "pushgate.yaml",
            """
            http:
              tls:
                certificate: /etc/pushgate/api.pem
                key: /etc/pushgate/api.key
                clientCA: /etc/pushgate/clients.pem
            """
        )
        let fromFile = try await load(file: file)
        #expect(
            fromFile.http.tls
                == .init(
                    certificate: "/etc/pushgate/api.pem",
                    key: "/etc/pushgate/api.key",
                    clientCA: "/etc/pushgate/clients.pem"
                )
        )
        let fromEnvironment = try await load(environment: [
            "PUSHGATE_HTTP_TLS_CERTIFICATE": "a.pem", "PUSHGATE_HTTP_TLS_KEY": "a.key",
            "PUSHGATE_HTTP_TLS_CLIENT_CA": "ca.pem",
        ])
        #expect(fromEnvironment.http.tls == .init(certificate: "a.pem", key: "a.key", clientCA: "ca.pem"))
        let fromFlags = try await load(arguments: [
            "--http-tls-certificate", "b.pem", "--http-tls-key", "b.key", "--http-tls-client-ca", "cb.pem",
        ])
        #expect(fromFlags.http.tls == .init(certificate: "b.pem", key: "b.key", clientCA: "cb.pem"))
        #expect(try await load().http.tls == nil, "no TLS unless asked")
    }

    @Test("a certificate without its key, or a client CA alone, stops start-up naming the missing key")
    func incompleteTLS() async {
        let noKey = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_HTTP_TLS_CERTIFICATE": "a.pem"])
        }
        #expect(noKey?.key == "http.tls.key")
        let onlyCA = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_HTTP_TLS_CLIENT_CA": "ca.pem"])
        }
        #expect(onlyCA?.key == "http.tls.certificate")
        let empty = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(arguments: ["--http-tls-certificate", "", "--http-tls-key", "k.pem"])
        }
        #expect(empty?.description == "http.tls.certificate: must not be empty")
    }

    @Test("udp.allow: CIDR ranges as a YAML list or comma-separated; the default follows the listen host")
    func udpAllow() async throws {
        let folder = try ConfigFolder()
        let file = try folder.write("pushgate.yaml", "udp:\n  allow: [10.0.0.0/8, \"2001:db8::/32\", 192.0.2.7]\n")
        let fromFile = try await load(file: file)
        #expect(fromFile.udp.allow?.map(\.description) == ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7/32"])
        let fromEnvironment = try await load(environment: ["PUSHGATE_UDP_ALLOW": "10.0.0.0/8, ::1"])
        #expect(fromEnvironment.udp.allow?.map(\.description) == ["10.0.0.0/8", "::1/128"])
        let fromFlag = try await load(arguments: ["--udp-allow", "172.16.0.0/12"])
        #expect(fromFlag.udp.allow?.map(\.description) == ["172.16.0.0/12"])

        var defaults = GatewayConfiguration()
        #expect(defaults.udp.effectiveAllow(listen: "localhost") == CIDRRange.loopback)
        #expect(defaults.udp.effectiveAllow(listen: "127.0.0.1") == CIDRRange.loopback)
        #expect(defaults.udp.effectiveAllow(listen: "0.0.0.0") == nil, "every sender, as before udp.allow")
        defaults.udp.allow = fromFlag.udp.allow
        #expect(defaults.udp.effectiveAllow(listen: "localhost")?.map(\.description) == ["172.16.0.0/12"])
    }

    @Test("a bad CIDR range in udp.allow stops start-up naming the key and the range")
    func badCIDR() async {
        let bad = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(environment: ["PUSHGATE_UDP_ALLOW": "10.0.0.0/8,10.1.2.3/8"])
        }
        #expect(
            bad?.description
                == "udp.allow: \"10.1.2.3/8\" is not a CIDR range: bits are set past the /8 prefix (did you mean 10.0.0.0/8?)"
        )
        let name = await problem { () async throws(ConfigurationProblem) in
            _ = try await load(arguments: ["--udp-allow", "backend.example.com"])
        }
        #expect(name?.key == "udp.allow")
        var empty = GatewayConfiguration()
        empty.udp.allow = []
        #expect(throws: ConfigurationProblem.self) { try empty.validate() }
    }
}
