// The browser launcher lives with the bench (which may not import tests); the browser suites use it from here.
export * from '../../bench/lib/browser.ts';
