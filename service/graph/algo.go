package graph

import "slices"

// csr is a directed graph over node indices in compressed sparse row form: the successors of v are
// succ[outStart[v]:outStart[v+1]], its predecessors pred[inStart[v]:inStart[v+1]]. Comet describes the graph as an
// adjacency matrix; that is O(V²) in memory and time, so Halley keeps the same information as adjacency lists.
type csr struct {
	n              int
	outStart, succ []int32
	inStart, pred  []int32
}

func newCSR(n int, arcs []arc) *csr {
	g := &csr{
		n:        n,
		outStart: make([]int32, n+1),
		inStart:  make([]int32, n+1),
		succ:     make([]int32, len(arcs)),
		pred:     make([]int32, len(arcs)),
	}
	for _, a := range arcs {
		g.outStart[a.from+1]++
		g.inStart[a.to+1]++
	}
	for v := 0; v < n; v++ {
		g.outStart[v+1] += g.outStart[v]
		g.inStart[v+1] += g.inStart[v]
	}
	outPos := slices.Clone(g.outStart[:n])
	inPos := slices.Clone(g.inStart[:n])
	for _, a := range arcs {
		g.succ[outPos[a.from]] = a.to
		outPos[a.from]++
		g.pred[inPos[a.to]] = a.from
		inPos[a.to]++
	}
	return g
}

func (g *csr) successors(v int32) []int32   { return g.succ[g.outStart[v]:g.outStart[v+1]] }
func (g *csr) predecessors(v int32) []int32 { return g.pred[g.inStart[v]:g.inStart[v+1]] }

// bfs returns which nodes can be reached from the sources, following arcs forwards, or backwards when reverse
// is set (then "seen" means "can reach a source").
func (g *csr) bfs(sources []int32, reverse bool) []bool {
	seen := make([]bool, g.n)
	queue := make([]int32, 0, g.n)
	for _, s := range sources {
		if !seen[s] {
			seen[s] = true
			queue = append(queue, s)
		}
	}
	next := g.successors
	if reverse {
		next = g.predecessors
	}
	for k := 0; k < len(queue); k++ {
		for _, w := range next(queue[k]) {
			if !seen[w] {
				seen[w] = true
				queue = append(queue, w)
			}
		}
	}
	return seen
}

// cycles finds the cycles of the graph: one per strongly connected component that has one, as the node indices
// in path order, starting from the component's first node in definition order.
//
// Kahn's algorithm first peels off every node that is on no cycle and downstream of none. What it leaves over are
// the cyclic components and the nodes downstream of them; Tarjan's algorithm splits that rest into strongly
// connected components, and a breadth-first search inside each cyclic component gives its shortest cycle
// through the first node. Each step is O(V+E).
func (g *csr) cycles() [][]int32 {
	indeg := make([]int32, g.n)
	for v := 0; v < g.n; v++ {
		indeg[v] = g.inStart[v+1] - g.inStart[v]
	}
	queue := make([]int32, 0, g.n)
	for v := 0; v < g.n; v++ {
		if indeg[v] == 0 {
			queue = append(queue, int32(v))
		}
	}
	for k := 0; k < len(queue); k++ {
		for _, w := range g.successors(queue[k]) {
			if indeg[w]--; indeg[w] == 0 {
				queue = append(queue, w)
			}
		}
	}
	if len(queue) == g.n {
		return nil // a DAG
	}
	rest := make([]bool, g.n)
	for v := 0; v < g.n; v++ {
		rest[v] = indeg[v] > 0
	}
	var out [][]int32
	comp := make([]int32, g.n)    // number (from 1) of the cyclic component a node is in
	visited := make([]int32, g.n) // number of the component whose search visited the node
	parent := make([]int32, g.n)
	for _, c := range g.sccs(rest) {
		if len(c) == 1 && !slices.Contains(g.successors(c[0]), c[0]) {
			continue // a node downstream of a cycle, on none itself
		}
		id := int32(len(out) + 1)
		for _, v := range c {
			comp[v] = id
		}
		out = append(out, g.shortestCycle(slices.Min(c), id, comp, visited, parent))
	}
	slices.SortFunc(out, func(a, b []int32) int { return int(a[0] - b[0]) })
	return out
}

// shortestCycle returns the shortest cycle through s inside component id, found breadth-first.
func (g *csr) shortestCycle(s, id int32, comp, visited, parent []int32) []int32 {
	queue := []int32{s}
	parent[s] = -1
	visited[s] = id
	for k := 0; k < len(queue); k++ {
		u := queue[k]
		for _, w := range g.successors(u) {
			if w == s {
				var path []int32
				for x := u; x != -1; x = parent[x] {
					path = append(path, x)
				}
				slices.Reverse(path)
				return path
			}
			if comp[w] == id && visited[w] != id {
				visited[w] = id
				parent[w] = u
				queue = append(queue, w)
			}
		}
	}
	return []int32{s} // unreachable: every node of a strongly connected component lies on a cycle through s
}

// sccs returns the strongly connected components of the subgraph induced by the members, with Tarjan's
// algorithm written iteratively so that a long chain cannot overflow the stack.
func (g *csr) sccs(member []bool) [][]int32 {
	index := make([]int32, g.n) // discovery order + 1; 0 = not yet visited
	low := make([]int32, g.n)
	onStack := make([]bool, g.n)
	var stack []int32
	type frame struct{ v, next int32 }
	var call []frame
	var counter int32
	var out [][]int32
	for s := int32(0); s < int32(g.n); s++ {
		if !member[s] || index[s] != 0 {
			continue
		}
		counter++
		index[s], low[s] = counter, counter
		stack = append(stack, s)
		onStack[s] = true
		call = append(call, frame{s, g.outStart[s]})
		for len(call) > 0 {
			top := len(call) - 1
			v := call[top].v
			if call[top].next < g.outStart[v+1] {
				w := g.succ[call[top].next]
				call[top].next++
				switch {
				case !member[w]:
				case index[w] == 0:
					counter++
					index[w], low[w] = counter, counter
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, g.outStart[w]})
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			call = call[:top]
			if top > 0 {
				p := call[top-1].v
				low[p] = min(low[p], low[v])
			}
			if low[v] == index[v] {
				var c []int32
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					c = append(c, w)
					if w == v {
						break
					}
				}
				out = append(out, c)
			}
		}
	}
	return out
}
