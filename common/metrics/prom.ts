/**
 * prom-client's metric classes, each from its own file. The package's index also loads its process
 * metrics (fs, v8, perf_hooks, cluster) and its push gateway (http, https, zlib), which edge runtimes
 * cannot or need not load; the classes themselves need only `util`. Types come from the index, whose
 * declarations describe these same classes.
 */
import CounterClass from "prom-client/lib/counter.js";
import GaugeClass from "prom-client/lib/gauge.js";
import HistogramClass from "prom-client/lib/histogram.js";
import RegistryClass from "prom-client/lib/registry.js";

import type * as PromClient from "prom-client";

export type Counter<T extends string = string> = PromClient.Counter<T>;
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export type Histogram<T extends string = string> = PromClient.Histogram<T>;
export type Registry = PromClient.Registry;
export const Counter = CounterClass;
export const Gauge = GaugeClass;
export const Histogram = HistogramClass;
export const Registry = RegistryClass;
