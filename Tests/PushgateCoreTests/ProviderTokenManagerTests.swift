import Foundation
import PushgateCore
import Testing

@Suite("Provider token manager")
struct ProviderTokenManagerTests {
    let clock = ManualWallClock(.testEpoch)
    let manager: ProviderTokenManager

    init() throws {
        let signer = try ProviderTokenSigner(
            pemRepresentation: TestKeys.pkcs8PEM,
            keyID: "ABC123DEFG",
            teamID: "DEF123GHIJ"
        )
        manager = ProviderTokenManager(signer: signer, clock: clock)
    }

    @Test("the first token is minted on demand with iat from the injected clock")
    func firstToken() throws {
        #expect(manager.tokensMinted == 0)
        clock.advance(by: 0.7)
        let token = try manager.currentToken()
        #expect(token.issuedAt == .testEpoch)
        #expect(manager.tokensMinted == 1)
    }

    @Test("one token is shared until the refresh age, then exactly one new token is minted")
    func sharedThenRefreshed() throws {
        let first = try manager.currentToken()
        for _ in 0..<49 {
            clock.advance(by: 60)
            #expect(try manager.currentToken() == first)
        }
        clock.advance(by: 60)
        let second = try manager.currentToken()
        #expect(second != first)
        #expect(second.issuedAt == Date.testEpoch.addingTimeInterval(50 * 60))
        #expect(try manager.currentToken() == second)
        #expect(manager.tokensMinted == 2)
    }

    @Test("a configured refresh age is used, clamped to Apple's window")
    func configuredRefreshAge() throws {
        let signer = try ProviderTokenSigner(pemRepresentation: TestKeys.pkcs8PEM, keyID: "K", teamID: "T")
        let manager = ProviderTokenManager(signer: signer, configuration: .init(refreshAge: .minutes(1)), clock: clock)
        let first = try manager.currentToken()
        clock.advance(by: 19 * 60)
        #expect(try manager.currentToken() == first)
        clock.advance(by: 60)
        #expect(try manager.currentToken() != first)
    }

    @Test("ExpiredProviderToken replaces the token once for a burst of rejections")
    func expiredTokenBurst() throws {
        let first = try manager.currentToken()
        clock.advance(by: 30 * 60)
        #expect(manager.tokenRejectedAsExpired(first) == .replace)
        for _ in 0..<5 { #expect(manager.tokenRejectedAsExpired(first) == .alreadyReplaced) }
        let second = try manager.currentToken()
        #expect(second != first)
        #expect(manager.tokenRejectedAsExpired(first) == .alreadyReplaced)
        #expect(try manager.currentToken() == second)
        #expect(manager.tokensMinted == 2)
        #expect(manager.youngTokensRejected == 0)
    }

    @Test("a young token rejected as expired is replaced and counted")
    func youngRejectionCounted() throws {
        let first = try manager.currentToken()
        clock.advance(by: 60)
        #expect(manager.tokenRejectedAsExpired(first) == .replaceYoungToken(age: .seconds(60)))
        #expect(manager.youngTokensRejected == 1)
        #expect(try manager.currentToken() != first)
    }

    @Test("concurrent callers get one token between them: signing happens once per refresh")
    func concurrentCallersSignOnce() async throws {
        let manager = self.manager
        let clock = self.clock
        for round in 1...3 {
            let tokens = try await withThrowingTaskGroup(of: ProviderToken.self) { group in
                for _ in 0..<200 { group.addTask { try manager.currentToken() } }
                return try await group.reduce(into: Set<ProviderToken>()) { $0.insert($1) }
            }
            #expect(tokens.count == 1)
            #expect(manager.tokensMinted == round)
            clock.advance(by: 50 * 60)
        }
    }

    @Test("the manager's description names the key and team only")
    func description() throws {
        let token = try manager.currentToken()
        let rendered = everyRendering(of: manager)
        #expect("\(manager)" == "ProviderTokenManager(keyID: ABC123DEFG, teamID: DEF123GHIJ)")
        for part in token.jwt.split(separator: ".") { #expect(!rendered.contains(part)) }
        for line in TestKeys.privateKeyLines { #expect(!rendered.contains(line)) }
    }
}
