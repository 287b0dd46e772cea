import Testing

@testable import PushgateHTTP

@Suite("CanonicalPath (pure)")
struct CanonicalPathTests {
    @Test(
        "the one spelling passes: literal segments, percent-encoded reserved characters, sub-delimiters",
        arguments: [
            "/", "/healthz", "/v1/notifications", "/v1/apps/news/groups/a%2Fb/devices/aa01",
            "/v1/apps/news/groups/caf%C3%A9/devices", "/v1/apps/news/groups/a%20b%3Bc/devices",
            "/v1/groups/a-b_c.d~e!$&'()*+,=:@/devices", "/v1/groups/a%2fb/devices",
        ]
    )
    func canonical(path: String) {
        #expect(CanonicalPath.problem(of: path) == nil)
    }

    @Test(
        "every other spelling is refused",
        arguments: [
            "", "v1/notifications", "*", "//v1/notifications", "/v1//notifications", "/v1/notifications/",
            "/./v1", "/v1/.", "/v1/..", "/v1/../healthz", "/%76%31/notifications", "/v1/%61pps", "/v1/%2e/x",
            "/v1/%2E%2E/x", "/v1/%7e", "/v1/%", "/v1/%4", "/v1/%zz", "/v1;x/notifications", "/v1/notifications;x",
            "/v1\\notifications", "/v1/a b", "/v1/caf\u{e9}", "/v1/a\"b", "/v1/a<b", "/v1/a#b", "/v1/a?b", "/v1/\u{0}",
        ]
    )
    func refused(path: String) {
        #expect(CanonicalPath.problem(of: path) != nil)
    }
}
