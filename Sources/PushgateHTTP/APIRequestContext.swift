package import Hummingbird

/// A request context that carries the one app the request's API key is limited to.
protocol AppScopedContext: RequestContext {
    /// Set by `APIKeyMiddleware` when the key is limited to one app and the route reads the app from the
    /// body: the route refuses (403) a body whose app is another, from its own strict parse.
    var appScope: String? { get set }
}

/// The request context of the API's routes.
package struct APIRequestContext: AppScopedContext {
    package var coreContext: CoreRequestContextStorage
    package var appScope: String?

    package init(source: Source) {
        self.coreContext = .init(source: source)
    }
}
