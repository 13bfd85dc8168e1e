var x,Fe,At,F,ve,ue,je,ie,qe,ye,be,It,ee=Symbol.for("pv"),de={},_e=[],Dt=/^m(i|n|o|s|text|space)$/,ke=Array.isArray,we=_e.slice,K=Object.assign;function z(t){t&&t.parentNode&&t.remove()}function We(t,e,n){var s,a,o,r={},l=arguments.length;for(o in e)o=="key"?s=e[o]:o=="ref"&&typeof t!="function"?a=e[o]:r[o]=e[o];return l>2&&(r.children=l>3?we.call(arguments,2):n),Z(t,r,s,a,null)}function Z(t,e,n,s,a){var o={type:t,props:e,key:n,ref:s,__k:null,__:null,__b:0,__e:null,__c:null,constructor:ee,__v:a||++Fe,__i:-1,__u:0};return!a&&x.vnode&&x.vnode(o),o}function pe(t){return t.children}function le(t,e){this.props=t,this.context=e,this.__g=0}function j(t,e){if(e==null)return t.__&&j(t.__,t.__i+1);for(var n;e<t.__k.length;e++)if((n=t.__k[e])&&n.__e)return n.__e;return typeof t.type!="function"||t.props.__P?null:j(t)}function Mt(t){var e,n=t.__v,s=n.__e,a=[],o=[],r=t.__P;r&&((e=K({constructor:ee},n)).__v=n.__v+1,x.vnode&&x.vnode(e),xe(r,e,n,t.__n,r.namespaceURI,32&n.__u?[s]:null,a,s||j(n),32&n.__u,o),e.__v=n.__v,e.__.__k[e.__i]=e,Xe(a,e,o),n.__=n.__e=null,e.__e!=s&&Ve(e))}function Ve(t){if((t=t.__)&&t.__c&&!t.props.__P)return t.__e=null,t.__k.some(function(e){return e&&(t.__e=e.__e)}),Ve(t)}function Be(t){(8&t.__g||(t.__g|=8,F.push(t),ue++))&&ve==x.debounceRendering||((ve=x.debounceRendering)||queueMicrotask)(Ge)}function Ge(){try{for(var t,e=1;F.length;)F.length>e&&F.sort(je),t=F.shift(),e=F.length,8&t.__g&&Mt(t)}finally{(ue=F.length)&&(ve||queueMicrotask)(Ge)}}function Je(t,e,n,s,a,o,r,l,d,p,u){var h,c,i,f,v,m,b=s.__k||_e,g=e.length;for(d=Lt(n,e,b,d,g),h=0;h<g;h++)(i=n.__k[h])!=null&&(c=~i.__i&&b[i.__i]||de,i.__i=h,m=xe(t,i,c,a,o,r,l,d,p,u),f=i.__e,(c.ref!=i.ref||8&c.__u)&&(c.ref&&Se(c.ref,null,i,c),i.ref&&u.push(i.ref,i.__c||f,i)),v=v||f,4&i.__u?(d=ze(i,d,t,!c.__v),c.__e&&(c.__e=null)):typeof i.type=="function"&&m!==void 0?d=m:f&&(d=f.nextSibling),i.__u&=-21);return n.__e=v,d}function Lt(t,e,n,s,a){var o,r,l,d,p,u,h,c,i,f=n.length,v=f,m=0,b=0,g=t.__k=Array(a);for(o=0;o<a;o++)(r=e[o])!=null&&typeof r!="boolean"&&typeof r!="function"?(typeof r!="object"||r.constructor===String?r=g[o]=Z(null,r):ke(r)?r=g[o]=Z(pe,{children:r}):r.constructor===ee&&r.__b?r=g[o]=Z(r.type,r.props,r.key,r.ref,r.__v):g[o]=r,d=o+m,r.__=t,r.__b=t.__b+1,l=null,~(p=r.__i=Bt(r,n,d,v))&&(v--,(l=n[p])&&(l.__u|=2)),l&&l.__v?(r.__u|=16,p==d-1?m--:p==d+1?m++:p!=d&&(p>d?m--:m++,b=1)):(~p||(a>f?m--:a<f&&m++),typeof r.type!="function"&&(r.__u|=4))):g[o]=null;if(b){for(u=[],h=[],o=0;o<a;o++)if((r=g[o])&&16&r.__u){for(m=0,c=u.length;m<c;)u[i=m+c>>1]<r.__i?m=i+1:c=i;u[m]=r.__i,h[o]=m+1}for(m=u.length;o--;)h[o]&&(h[o]==m?m--:g[o].__u|=4)}if(v)for(o=0;o<f;o++)!(l=n[o])||2&l.__u||(l.__e==s&&(s=j(l)),Ce(l,l));return s}function ze(t,e,n,s){var a,o,r,l;if(typeof t.type=="function"){if(t.props.__P)return e;if(a=t.__k)for(o=0;o<a.length;o++)a[o]&&(a[o].__=t,e=ze(a[o],e,n,!1));return e}for(e&&!e.parentNode&&(e=j(t))&&!e.parentNode&&(e=null),r=t.__e,l=e;l&&l.nodeType==8;)l=l.nextSibling;for(r!=l&&(!s&&n.moveBefore&&r.parentNode?n.moveBefore(r,e):n.insertBefore(r,e||null)),e=r;(e=e&&e.nextSibling)&&e.nodeType==8&&!e.data.startsWith("$s"););return e}function Bt(t,e,n,s){var a,o=t.key,r=t.type,l=e[n],d=l&&!(2&l.__u);if(l===null&&o==null||d&&o==l.key&&r==l.type)return n;if(s>(d?1:0)){for(a=n-1;a>=0;a--)if((l=e[a])&&!(2&l.__u)&&o==l.key&&r==l.type)return a;for(a=n+1;a<e.length;a++)if((l=e[a])&&!(2&l.__u)&&o==l.key&&r==l.type)return a}return-1}function He(t,e,n){n==null&&(n=""),e[0]=="-"?t.setProperty(e,n):t[e]=n}function ae(t,e,n,s,a){var o,r;if(e=="style")if(typeof n=="string")t.style.cssText=n;else{if(typeof s=="string"&&(t.style.cssText=s=""),s)for(e in s)n&&e in n||He(t.style,e);if(n)for(e in n)s&&n[e]==s[e]||He(t.style,e,n[e])}else if(e[0]=="o"&&e[1]=="n")typeof n!="function"&&(n=null),typeof s!="function"&&(s=null),(t.__e||(t.__e={}))[e]=n,n&&s||(r=be[e]||(be[e]=Ht(e)),(t.__a||(t.__a={}))[e]=ye,o=e!=(e=e.replace(qe,"$1")),(e=e.slice(2))[0]<"a"&&(e=e.toLowerCase()),n?t.addEventListener(e,r,o):t.removeEventListener(e,r,o));else{if(a=="http://www.w3.org/2000/svg")e=e.replace(/xlink(H|:h)/,"h").replace(/sName$/,"s");else if(e!="width"&&e!="height"&&e!="href"&&e!="list"&&e!="form"&&e!="tabIndex"&&e!="download"&&e!="rowSpan"&&e!="colSpan"&&e!="role"&&e!="popover"&&e in t)try{return void(t[e]=n??"")}catch{}if(typeof n=="function")return;n==null||n===!1&&e[4]!="-"?t.removeAttribute(e):t.setAttribute(e,e=="popover"&&n==1?"":n)}}function Ht(t){return function(e){var n=this.__e;if(n){if(n=n[t],e[ie]==null)e[ie]=ye++;else if(e[ie]<this.__a[t])return;return n(x.event?x.event(e):e)}}}function xe(t,e,n,s,a,o,r,l,d,p){var u,h,c,i,f,v,m,b,g,w,y,V,G,J,L,R,P,U,O=e.type;if(e.constructor!==ee)return null;128&n.__u&&(d=32&n.__u,u=n.__c.__z)&&(e.__u|=d,h=o=[],u.nodeType==8?l=ce(u,o):o.push(u),l=o[0]||l),(u=x.__b)&&u(e);e:if(typeof O=="function"){c=r.length;try{if(b=e.props,g=(u=O.prototype)&&u.render,w=(u=O.contextType)&&s[u.__c],y=u?w?w.props.value:u.__:s,(i=n.__c)?(e.__c=i,2&i.__g&&(i.__g|=1)):(g?e.__c=i=new O(b,y):(e.__c=i=new le(b,y),i.constructor=O,i.render=jt),w&&w.sub(i),i.state||(i.state={}),i.__n=s,i.__g|=8,i.__h=[],i.__k=[]),g&&(i.__s||(i.__s=i.state),O.getDerivedStateFromProps&&(i.__s==i.state&&(i.__s=K({},i.__s)),K(i.__s,O.getDerivedStateFromProps(b,i.__s)))),f=i.props,v=i.state,i.__v=e,n.__c){if(b!==f&&g&&!O.getDerivedStateFromProps&&i.componentWillReceiveProps&&i.componentWillReceiveProps(b,y),e.__v==n.__v&&!(8&i.__g)||!(4&i.__g)&&i.shouldComponentUpdate&&i.shouldComponentUpdate(b,i.__s,y)===!1){e.__v!=n.__v&&(i.props=b,i.state=i.__s,i.__g&=-9),e.__e=n.__e,e.__k=n.__k,e.__k.some(function(k){k&&(k.__=e)}),_e.push.apply(i.__h,i.__k),i.__k=[],i.__h.length&&r.push(i),l=j(n);break e}i.componentWillUpdate&&i.componentWillUpdate(b,i.__s,y),g&&i.componentDidUpdate&&i.__h.push(function(){i.componentDidUpdate(f,v,m)})}else g&&!O.getDerivedStateFromProps&&i.componentWillMount&&i.componentWillMount(),g&&i.componentDidMount&&i.__h.push(i.componentDidMount);i.context=y,i.props=b,i.__P=t,i.__g&=-5,V=x.__r,G=g?25:0;do i.__g&=-9,V&&V(e),u=i.render(i.props,i.state=i.__s,i.context);while(8&i.__g&&++G<25);g&&(_e.push.apply(i.__h,i.__k),i.__k=[]),i.state=i.__s,i.getChildContext&&(s=K({},s,i.getChildContext())),g&&n.__c&&i.getSnapshotBeforeUpdate&&(m=i.getSnapshotBeforeUpdate(f,v)),J=u&&u.type===pe&&u.key==null?u.props.children:u,b.__P&&(u=l,a=(t=b.__P).namespaceURI,d=o=null,n.props&&n.props.__P!=t&&(n.__k.some(function(k){k&&Ce(k,k)}),n.__k=null),l=n.__k?j(n,0):null),l=Je(t,ke(J)?J:[J],e,n,s,a,o,r,l,d,p),b.__P&&(e.__e=null,l=u),e.__u&=-161,h&&h.some(z),i.__h.length&&r.push(i),1&i.__g&&(i.__g&=-4)}catch(k){if(r.length=c,e.__v=null,d||o)if(k&&k.then){if(e.__u|=128|d,o){for(~(P=o.indexOf(l||void 0))||(P=o.length);(U=o[P-1])&&U.nodeType==8;)P--;for(;P<o.length;P++)if(U=o[P])if(o[P]=null,L){if(U==R)break}else{if(U.nodeType!=8)break;U.data.startsWith("$s")&&(R=ce(L=U))}}if(!L){for(;l&&l.nodeType==8&&l.nextSibling;)l=l.nextSibling;L=l}(u=ce(L=e.__c.__z||(e.__c.__z=L)))?(e.__e=L,l=u):e.__e=l,l=l&&l.nextSibling}else o&&o.some(z);else e.__e=n.__e;e.__k||(e.__k=n.__k||[]),k&&k.then||Ke(e),x.__e(k,e,n)}}else l=e.__e=Ft(n.__e,e,n,s,a,o,r,d,p,t);return(u=x.diffed)&&u(e),l}function ce(t,e){if(t&&t.nodeType==8&&t.data.startsWith("$s"))for(var n=1;t=t.nextSibling;){if(t.nodeType==8){if(t.data.startsWith("$s"))n++;else if(t.data.startsWith("/$s")&&!--n)return t}e&&e.push(t)}}function Ke(t){t&&(t.__c&&(t.__c.__g|=4),t.__k&&t.__k.some(Ke))}function Xe(t,e,n){for(var s=0;s<n.length;)Se(n[s++],n[s++],n[s++]);x.__c&&x.__c(e,t),t.some(function(a){try{t=a.__h,a.__h=[],t.some(function(o){o.call(a)})}catch(o){x.__e(o,a.__v)}})}function Ft(t,e,n,s,a,o,r,l,d,p){var u,h,c,i,f,v,m,b,g=n.props||de,w=e.props,y=e.type;if(y=="svg"?a="http://www.w3.org/2000/svg":y=="math"?a="http://www.w3.org/1998/Math/MathML":a||(a="http://www.w3.org/1999/xhtml"),o){for(u=0;u<o.length;u++)if((f=o[u])&&(y?f.localName==y:f.nodeType==3)){t=f,o[u]=null;break}}if(!t){if(b=p.ownerDocument||document,!y)return b.createTextNode(w);t=b.createElementNS(a,y,w.is?w:p),l&&(x.__m&&x.__m(e,o),l=!1),o=null}if(y){if(p=y=="template"&&t.content||t,o=y=="textarea"&&w.defaultValue!=null?null:o&&we.call(p.childNodes),!l&&o)for(g={},u=0;u<t.attributes.length;u++)g[(f=t.attributes[u]).name]=f.value;for(u in g)f=g[u],u=="dangerouslySetInnerHTML"?c=f:u=="children"||u in w||u=="value"&&"defaultValue"in w||u=="checked"&&"defaultChecked"in w||ae(t,u,null,f,a);for(u in w)f=w[u],u=="children"?i=f:u=="dangerouslySetInnerHTML"?h=f:u=="value"?v=f:u=="checked"?m=f:l&&typeof f!="function"||g[u]===f||ae(t,u,f,g[u],a);h?(l||c&&(h.__html==c.__html||h.__html==t.innerHTML)||(t.innerHTML=h.__html),e.__k=[]):(c&&(t.textContent=""),(y=="foreignObject"||a=="http://www.w3.org/1998/Math/MathML"&&Dt.test(y))&&(a="http://www.w3.org/1999/xhtml"),Je(p,ke(i)?i:[i],e,n,s,a,o,r,o?o[0]:n.__k&&j(n,0),l,d),o&&o.some(z)),l&&y!="textarea"||(u="value",y=="progress"&&v==null?t.removeAttribute(u):v==null||v===t[u]&&(y!="progress"||v)||ae(t,u,v,g[u],a),u="checked",m!=null&&m!=t[u]&&ae(t,u,m,g[u],a))}else g===w||l&&t.data==w||(t.data=w);return t}function Se(t,e,n,s){try{typeof t=="function"?e?e.__x=t(e)||1:s&&(s=s.__c||s.__e)&&(e=s.__x)&&(s.__x=null,typeof e=="function"?e():t(null)):t.current=e}catch(a){x.__e(a,n)}}function Ce(t,e,n){var s,a,o,r;if(x.unmount&&x.unmount(t),!(s=t.ref)||s.current&&s.current!=t.__e||Se(s,null,e,t),s=t.__c){if(s.componentWillUnmount)try{s.componentWillUnmount()}catch(l){x.__e(l,e)}s.__P=s.__n=null}if(s=t.__k)for(r=0;r<s.length;r++)s[r]&&Ce(s[r],e,typeof t.type!="function"||n&&!t.props.__P);!n&&(s=t.__c)&&(s=s.__z)&&(a=ce(s,o=[]))&&(s==t.__e&&o.some(z),z(a),z(s)),n||z(t.__e),t.__e=t.__c=t.__=null}function jt(t,e,n){return this.constructor(t,n)}function Qe(t,e){var n,s,a,o;x.__&&x.__(t,e),e.nodeType==9&&(e=e.documentElement),s=(n=t&&32&t.__u)?null:e.__k,e.__k=Z(pe,{children:[t]}),a=[],o=[],xe(e,e.__k,s||de,de,e.namespaceURI,s?null:e.firstChild?we.call(e.childNodes):null,a,s?s.__e:e.firstChild,n,o),Xe(a,e.__k,o),e.__k.props.children=null}x={__e:function(t,e,n,s){for(var a,o,r;e=e.__;)if((a=e.__c)&&!(1&a.__g)){a.__g|=4;try{if((r=(o=a.constructor)&&o.getDerivedStateFromError)&&a.setState(o.getDerivedStateFromError(t)),a.componentDidCatch&&(a.componentDidCatch(t,s||{}),r=1),r&&8&a.__g)return void(a.__g|=2)}catch(l){t=l}}throw ue=0,t}},Fe=0,At=function(t){return t!=null&&t.constructor===ee},le.prototype.setState=function(t,e){var n=this.__s;n&&n!=this.state||(n=this.__s=K({},this.state)),typeof t=="function"&&(t=t(K({},n),this.props)),t&&(K(n,t),this.__v&&(e&&this.__k.push(e),Be(this)))},le.prototype.forceUpdate=function(t){this.__v&&(this.__g|=4,t&&this.__h.push(t),Be(this))},le.prototype.render=pe,F=[],ue=0,je=function(t,e){return t.__v.__b-e.__v.__b},ie=Symbol(),qe=/(PointerCapture)$|Capture$/i,ye=0,be={},It=0;var ne,T,Te,Ye,Pe=Object.is,se=0,it=[],Ee=[],C=x,Ze=C.__b,et=C.__r,tt=C.diffed,nt=C.__c,st=C.unmount,ot=C.__;function Re(t,e){C.__h&&C.__h(T,t,se||e),se=0;var n=T.__H||(T.__H={__:[],__h:[]});return t>=n.__.length&&n.__.push({}),n.__[t]}function $(t){return se=1,qt(ut,t)}function qt(t,e,n){var s=Re(ne++,2);if(s.t=t,!s.__c&&(s.__=[n?n(e):ut(void 0,e),function(o){var r=(s.__N||s.__)[0],l=s.t(r,o);Pe(r,l)||(s.__N=[l,s.__[1]],s.__c.setState({}))}],s.__c=T,!T.__f)){T.__f=!0;var a=T.shouldComponentUpdate;T.shouldComponentUpdate=function(o,r,l){var d=this.__H;if(!d)return!0;var p=!1,u=this.props!=o;if(d.__.some(function(c){c.__N&&(p=!0,Pe(c.__[0],c.__N[0])||(u=!0))}),a){var h=a.call(this,o,r,l);return p?h||u:h}return!p||u}}return s.__}function I(t,e){var n=Re(ne++,3);!C.__s&&ct(n.__H,e)&&(n.__P=!0,n.__=t,n.u=e,T.__H.__h.push(n))}function fe(t){return se=5,lt(function(){return{current:t}},[])}function lt(t,e){var n=Re(ne++,7);return ct(n.__H,e)&&(n.__=t(),n.__H=e),n.__}function oe(t,e){return se=8,lt(function(){return t},e)}function Wt(){var t;do{for(;t=Ee.shift();)try{te(t)}catch(n){C.__e(n,{__:(t=t.__P)&&t.__v})}for(;t=it.shift();){var e=t.__H;if(t.__P&&e)try{e.__h.some(te),e.__h.some(Ne),e.__h=[]}catch(n){e.__h=[],C.__e(n,t.__v)}}}while(Ee.length)}C.__b=function(t){T=null,Ze&&Ze(t)},C.__=function(t,e){t&&e.__k&&e.__k.__m&&(t.__m=e.__k.__m),ot&&ot(t,e)},C.__r=function(t){et&&et(t),ne=0;var e=(T=t.__c).__H;e&&(Te==T?T.__h=[]:(e.__h.some(te),e.__h.some(Ne),ne=0),e.__h=[],e.__.some(function(n){n.__N&&(n.__=n.__N),n.u=n.__N=void 0})),Te=T},C.diffed=function(t){tt&&tt(t);var e=t.__c;e&&e.__H&&(e.__H.__h.length&&at(it.push(e)),e.__H.__.some(function(n){n.u&&(n.__H=n.u)})),Te=T=null},C.__c=function(t,e){e.some(function(n){try{n.__h.some(te),n.__h=n.__h.filter(function(s){return!s.__||Ne(s)})}catch(s){n.__h=[function(){throw s}]}}),nt&&nt(t,e)},C.unmount=function(t){st&&st(t);var e,n,s=t.__c;s&&s.__H&&(s.__H.__.some(function(a){try{if(a.__P&&a.__c){if(n===void 0){for(n=t.__;n&&(!n.__c||!n.__c.__P);)n=n.__;n=n&&n.__c}a.__P=n,at(Ee.push(a))}else te(a)}catch(o){e=o}}),s.__H=void 0,e&&C.__e(e,s.__v))};var rt=typeof requestAnimationFrame=="function";function Vt(t){var e,n=function(){clearTimeout(s),rt&&cancelAnimationFrame(e),setTimeout(t)},s=setTimeout(n,35);rt&&(e=requestAnimationFrame(n))}function at(t){t!=1&&Ye==C.requestAnimationFrame||((Ye=C.requestAnimationFrame)||Vt)(Wt)}function te(t){var e=T,n=t.__c;typeof n=="function"&&(t.__c=void 0,n()),T=e}function Ne(t){var e=T;t.__c=t.__(),T=e}function ct(t,e){return!t||t.length!=e.length||e.some(function(n,s){return!Pe(n,t[s])})}function ut(t,e){return typeof e=="function"?e(t):e}var _t=function(t,e,n,s){var a;e[0]=0;for(var o=1;o<e.length;o++){var r=e[o++],l=e[o]?(e[0]|=r?1:2,n[e[o++]]):e[++o];r===3?s[0]=l:r===4?s[1]=Object.assign(s[1]||{},l):r===5?(s[1]=s[1]||{})[e[++o]]=l:r===6?s[1][e[++o]]+=l+"":r?(a=t.apply(l,_t(t,l,n,["",null])),s.push(a),l[0]?e[0]|=2:(e[o-2]=0,e[o]=a)):s.push(l)}return s},dt=new Map;function pt(t){var e=dt.get(this);return e||(e=new Map,dt.set(this,e)),(e=_t(this,e.get(t)||(e.set(t,e=(function(n){for(var s,a,o=1,r="",l="",d=[0],p=function(c){o===1&&(c||(r=r.replace(/^\s*\n\s*|\s*\n\s*$/g,"")))?d.push(0,c,r):o===3&&(c||r)?(d.push(3,c,r),o=2):o===2&&r==="..."&&c?d.push(4,c,0):o===2&&r&&!c?d.push(5,0,!0,r):o>=5&&((r||!c&&o===5)&&(d.push(o,0,r,a),o=6),c&&(d.push(o,c,0,a),o=6)),r=""},u=0;u<n.length;u++){u&&(o===1&&p(),p(u));for(var h=0;h<n[u].length;h++)s=n[u][h],o===1?s==="<"?(p(),d=[d],o=3):r+=s:o===4?r==="--"&&s===">"?(o=1,r=""):r=s+r[0]:l?s===l?l="":r+=s:s==='"'||s==="'"?l=s:s===">"?(p(),o=1):o&&(s==="="?(o=5,a=r,r=""):s==="/"&&(o<5||n[u][h+1]===">")?(p(),o===3&&(d=d[0]),o=d,(d=d[0]).push(2,0,o),o=0):s===" "||s==="	"||s===`
`||s==="\r"?(p(),o=2):r+=s),o===3&&r==="!--"&&(o=4,d=d[0])}return p(),d})(t)),e),arguments,[])).length>1?e:e[0]}var _=pt.bind(We);var Ue="",B;function ft(){if(B===void 0){let t=document.getElementById("hxd-console-config");try{B=JSON.parse(t?t.textContent:"{}")}catch{B={}}(!B||typeof B!="object")&&(B={}),"oidc"in B||(B.oidc=null)}return B}function me(){return Ue}function Oe(t){Ue=t||""}function mt(){Ue="",location.pathname!=="/ui/sign-in"&&(history.pushState(null,"","/ui/sign-in"),dispatchEvent(new PopStateEvent("popstate")))}async function Ae(t){history.pushState(null,"",t||"/ui/"),dispatchEvent(new PopStateEvent("popstate"))}async function ht(){return"/ui/"}function $t(){let[t,e]=$("");return _`<section class="card">
    <h1>Sign in</h1>
    <form onSubmit=${s=>{s.preventDefault(),Oe(t.trim()),Ae("/ui/")}}>
      <label for="token">Bearer token</label>
      <input id="token" data-testid="token-input" type="password" autocomplete="off"
        value=${t} onInput=${s=>e(s.target.value)} />
      <button data-testid="token-submit" type="submit">Use token</button>
    </form>
  </section>`}var Ie="/ui";function q(t,{replace:e=!1}={}){e?history.replaceState(null,"",t):history.pushState(null,"",t),dispatchEvent(new PopStateEvent("popstate"))}function gt(){let[t,e]=$(location.pathname+location.search);return I(()=>{let n=()=>e(location.pathname+location.search);return addEventListener("popstate",n),()=>removeEventListener("popstate",n)},[]),t}function vt(t){let e=t.split("?")[0].replace(/\/+$/,""),n;return e===Ie||e===""?{name:"sessions",params:{}}:(n=e.match(/^\/ui\/sessions\/([^/]+)$/))?{name:"session",params:{id:decodeURIComponent(n[1])}}:(n=e.match(/^\/ui\/runs\/([^/]+)$/))?{name:"run",params:{id:decodeURIComponent(n[1])}}:e==="/ui/bundles"?{name:"bundles",params:{}}:e==="/ui/callback"?{name:"callback",params:{}}:e==="/ui/sign-in"?{name:"sign-in",params:{}}:{name:"not-found",params:{}}}function E(t){if(t.defaultPrevented||t.button!==0||t.metaKey||t.ctrlKey||t.shiftKey||t.altKey)return;let n=t.currentTarget.getAttribute("href");!n||!n.startsWith(Ie+"/")&&n!==Ie||(t.preventDefault(),q(n))}var De=class extends Error{constructor(e,n){let s=n||{};super(s.detail||s.title||`HTTP ${e}`),this.name="ProblemError",this.status=e,this.code=s.code||"",this.title=s.title||`HTTP ${e}`,this.detail=s.detail||"",this.problem=s}};function bt(t={}){let e={...t},n=me();return n&&(e.Authorization=`Bearer ${n}`),e}async function yt(t){let e=null;if((t.headers.get("Content-Type")||"").includes("json"))try{e=await t.json()}catch{e=null}return t.status===401&&mt(),new De(t.status,e||{title:t.statusText||`HTTP ${t.status}`})}async function S(t,e,{body:n,query:s,headers:a,raw:o,signal:r}={}){let l=e;if(s){let h=new URLSearchParams;for(let[i,f]of Object.entries(s))f!=null&&f!==""&&h.set(i,String(f));let c=h.toString();c&&(l+=(l.includes("?")?"&":"?")+c)}let d=bt({Accept:"application/json",...a||{}}),p={method:t,headers:d,signal:r};n!==void 0&&(d["Content-Type"]="application/json",p.body=JSON.stringify(n));let u=await fetch(l,p);if(!u.ok)throw await yt(u);return o?u:u.status===204?null:u.json()}function Gt(t){let e=[],n=t.replace(/\r\n?/g,`
`),s=0;for(;;){let a=n.indexOf(`

`,s);if(a<0)break;let o=n.slice(s,a);s=a+2;let r={id:null,event:"message",data:[]},l=!1;for(let d of o.split(`
`)){if(d===""||d.startsWith(":"))continue;let p=d.indexOf(":"),u=p<0?d:d.slice(0,p),h=p<0?"":d.slice(p+1);if(h.startsWith(" ")&&(h=h.slice(1)),u==="id")r.id=h;else if(u==="event")r.event=h;else if(u==="data")r.data.push(h);else continue;l=!0}l&&e.push(r)}return{frames:e,rest:n.slice(s)}}async function*kt(t,{lastEventId:e,signal:n}={}){let s=bt({Accept:"text/event-stream"});e&&(s["Last-Event-ID"]=String(e));let a=await fetch(`/runs/${encodeURIComponent(t)}/events`,{headers:s,signal:n,cache:"no-store"});if(!a.ok)throw await yt(a);let o=a.body.getReader(),r=new TextDecoder,l="";try{for(;;){let{value:d,done:p}=await o.read();if(p)break;l+=r.decode(d,{stream:!0});let{frames:u,rest:h}=Gt(l);l=h;for(let c of u){if(!c.data.length)continue;let i;try{i=JSON.parse(c.data.join(`
`))}catch{continue}c.id&&!i.cursor&&(i.cursor=c.id),yield i}}}finally{o.releaseLock()}}var wt=["running","completed","paused","awaiting_input","cancelled","failed"];function Me(t){return t!=="running"}function N({error:t}){if(!t)return null;let e=t.title||"Error",n=t.detail||(t.title?"":String(t.message||t));return _`<div class="problem" role="alert" data-testid="problem">
    <strong>${e}</strong>${n?_`: <span>${n}</span>`:null}
    ${t.code?_` <code>${t.code}</code>`:null}
  </div>`}function H({status:t,testid:e}){return t?_`<span class=${"status status-"+t} data-testid=${e}>${t}</span>`:_`<span class="status status-none">no run</span>`}function X({value:t}){return _`<pre class="json">${typeof t=="string"?t:JSON.stringify(t,null,2)}</pre>`}function M(t){return t?`${t.name}@${t.version}`:""}function re(t){return t==null?"":t<1?`${Math.round(t*1e3)} ms`:t<120?`${(Math.round(t*10)/10).toString()} s`:`${Math.round(t/60)} min`}var Jt=new Intl.DateTimeFormat(void 0,{year:"numeric",month:"short",day:"numeric",hour:"2-digit",minute:"2-digit",second:"2-digit"});function zt(t){let e=new Date(t);return Number.isNaN(e.getTime())?String(t||""):Jt.format(e)}function D(t){if(!t)return null;let e=new Date(t),n=Number.isNaN(e.getTime())?String(t):e.toISOString();return _`<time datetime=${n} title=${n+" (UTC)"}>${zt(t)}</time>`}var A=t=>t?new Date(t).getTime():NaN,St={running:"running",succeeded:"succeeded",failed:"failed",retrying:"failed, retried",uncertain:"uncertain outcome",awaiting_approval:"awaiting approval",declined:"declined",reset:"reset (attempt_reset)",cancelled:"cancelled",aborted:"aborted"},Kt={...St,retrying:"failed",reset:"reset"},xt={paused:"paused",resumed:"resumed",cancelled:"cancelled",approval_required:"approval required",approval_given:"approval given",approval_declined:"approval declined",resolved:"resolved",attempt_reset:"attempt reset",failed:"failed",completed:"completed"};function Xt(t,e){let n=A(t.created_at),s=A(t.updated_at);for(let a of t.attempts||[]){let o=A(a.started_at);if(!Number.isNaN(o)){(Number.isNaN(n)||o<n)&&(n=o);let r=a.ended_at?A(a.ended_at):e;a.retry_wait_seconds&&(r+=a.retry_wait_seconds*1e3),(Number.isNaN(s)||r>s)&&(s=r)}}for(let a of t.marks||[]){let o=A(a.at);!Number.isNaN(o)&&(Number.isNaN(s)||o>s)&&(s=o)}return t.status==="running"&&e>s&&(s=e),Number.isNaN(n)&&(n=e),(Number.isNaN(s)||s<=n)&&(s=n+1e3),{lo:n,hi:s,len:s-n}}function Qt(t){let n=[10,20,50,100,200,500,1e3,2e3,5e3,1e4,3e4,6e4,12e4,3e5,6e5,18e5,36e5].find(a=>t/a<=8)||t/8,s=[];for(let a=0;a<=t;a+=n)s.push(a);return s}function Yt(t){return t<1e3?`${t} ms`:re(t/1e3)}function he(t){return`${t.lane}|${t.step_id}|${t.attempt}|${t.call_id||""}`}function Zt(t,e){let n=[`${e}, step ${t.step_id}, attempt ${t.attempt}: ${St[t.outcome]||t.outcome}`];return t.error&&n.push(`${t.error.type}: ${t.error.message}`),t.started_at&&t.ended_at&&n.push(re((A(t.ended_at)-A(t.started_at))/1e3)),t.retry_wait_seconds&&n.push(`then waited ${re(t.retry_wait_seconds)} before retrying`),t.approval&&(t.approval.decided_at?n.push(t.approval.approved?"approved":"declined"):n.push("approval awaited")),n.join("; ")}function en(t){return t.kind==="model"?"model":t.tool||t.id.replace(/^tool:/,"")}function Ct({timeline:t,onSelect:e,selected:n}){if(!t)return null;let s=Date.now(),{lo:a,len:o}=Xt(t,s),r=c=>`${Math.max(0,Math.min(100,(c-a)/o*100))}%`,l=t.lanes||[],d=t.attempts||[],p=t.marks||[],u=Object.fromEntries(l.map(c=>[c.id,en(c)])),h=c=>{let i=A(c.started_at),f=c.ended_at?A(c.ended_at):s,v=r(i),m=`max(${Math.max(f-i,0)/o*100}%, 2.2rem)`,b=Zt(c,u[c.lane]||c.lane),g=he(c),w=c.retry_wait_seconds?_`<span class="wait" aria-hidden="true" title=${`retry wait ${re(c.retry_wait_seconds)}`}
      style=${{left:r(f),width:`${c.retry_wait_seconds*1e3/o*100}%`}}></span>`:null,y=c.approval?_`<span class=${"approval"+(c.approval.decided_at?c.approval.approved?" approved":" declined":" awaited")}
      aria-hidden="true" style=${{left:r(A(c.approval.requested_at)),width:`${((c.approval.decided_at?A(c.approval.decided_at):s)-A(c.approval.requested_at))/o*100}%`}}></span>`:null;return _`${y}<button type="button" class=${"bar outcome-"+c.outcome+(n===g?" selected":"")}
        data-testid="bar" data-lane=${c.lane} data-attempt=${String(c.attempt)} data-outcome=${c.outcome} data-step=${c.step_id}
        aria-label=${b} title=${b} aria-pressed=${n===g?"true":"false"}
        style=${{left:v,width:m}} onClick=${()=>e&&e(c)}>
        <span class="bar-text">#${c.attempt}${c.outcome==="succeeded"?"":" "+(Kt[c.outcome]||c.outcome)}</span>
      </button>${w}`};return _`<div class="timeline" data-testid="timeline">
    <div class="timeline-scroll">
      <div class="timeline-inner" role="grid" aria-label="Run timeline: attempts by lane over time" aria-rowcount=${l.length+2}>
        <div class="lane axis" role="row">
          <div class="lane-name" role="rowheader">time</div>
          <div class="track" role="gridcell">
            ${Qt(o).map(c=>_`<span class="tick" style=${{left:r(a+c)}}>${Yt(c)}</span>`)}
          </div>
        </div>
        ${l.map(c=>_`<div class="lane" role="row" data-testid="lane" data-lane=${c.id}>
          <div class="lane-name" role="rowheader" title=${c.id}>${u[c.id]}</div>
          <div class="track" role="gridcell">
            ${d.filter(i=>i.lane===c.id).map(h)}
            ${p.map(i=>_`<span class="mark-line" aria-hidden="true" style=${{left:r(A(i.at))}}></span>`)}
          </div>
        </div>`)}
        <div class="lane marks" role="row">
          <div class="lane-name" role="rowheader">marks</div>
          <div class="track" role="gridcell">
            ${p.map(c=>{let i=`${xt[c.type]||c.type}${c.step_id?" (step "+c.step_id+")":""}${c.detail?": "+c.detail:""}`;return _`<span role="img" tabindex="0" class=${"mark mark-"+c.type} data-testid="mark" data-type=${c.type}
                style=${{left:r(A(c.at))}} aria-label=${`${i} at ${new Date(c.at).toISOString()}`}
                title=${`${i} — ${new Date(c.at).toISOString()}`}>${xt[c.type]||c.type}</span>`})}
          </div>
        </div>
      </div>
    </div>
    <ul class="legend" aria-label="Legend">
      <li><span class="swatch outcome-succeeded"></span>succeeded</li>
      <li><span class="swatch outcome-retrying"></span>failed / retried</li>
      <li><span class="swatch wait-swatch"></span>retry wait</li>
      <li><span class="swatch outcome-uncertain"></span>uncertain</li>
      <li><span class="swatch outcome-awaiting_approval"></span>awaiting approval</li>
      <li><span class="swatch outcome-reset"></span>reset</li>
      <li><span class="swatch outcome-running"></span>running</li>
    </ul>
  </div>`}var W=encodeURIComponent;async function Tt(t){((await S("GET",`/sessions/${W(t)}/pending`)).items||[]).length===0&&await S("POST",`/sessions/${W(t)}/resume`,{body:{}})}function tn({sessionId:t,item:e,onDone:n}){let[s,a]=$(!1),[o,r]=$(null),[l,d]=$(""),p=e.execution_key,u=async f=>{a(!0),r(null);try{await f(),n&&n()}catch(v){r(v)}finally{a(!1)}},h=f=>u(async()=>{await S("POST",`/sessions/${W(t)}/tools/${W(p)}/approve`,{body:{allow:f,resume:!1}}),await Tt(t)}),c=(f,v)=>u(async()=>{await S("POST",`/sessions/${W(t)}/tools/${W(p)}/resolve`,{body:f}),v&&await Tt(t)}),i=e.status==="approval";return _`<li class="pending card" data-testid="pending-call" data-execution-key=${p}>
    <div><strong>${e.call.name}</strong> <span class="muted">${i?"awaits approval":`outcome ${e.status}`}</span>
      <span class="muted"> · attempt ${e.attempt} · policy ${e.policy}</span></div>
    <details><summary>Input</summary><${X} value=${e.call.input} /></details>
    ${i?_`<div class="buttons">
      <button data-testid="approve" disabled=${s} onClick=${()=>h(!0)}>Approve</button>
      <button data-testid="decline" class="secondary" disabled=${s} onClick=${()=>h(!1)}>Decline</button>
    </div>`:_`<div class="resolve">
      <label for=${"res-"+p}>Verified result</label>
      <textarea id=${"res-"+p} rows="2" value=${l} onInput=${f=>d(f.target.value)}
        placeholder="What the tool did (given to the model as its result)"></textarea>
      <div class="buttons">
        <button data-testid="resolve-result" disabled=${s||!l.trim()}
          onClick=${()=>c({result:{tool_call_id:e.call.id,content:l,is_error:!1}},!0)}>Use this result</button>
        <button data-testid="resolve-retry" class="secondary" disabled=${s} onClick=${()=>c({retry:!0},!0)}>Retry the tool</button>
        <button data-testid="resolve-abort" class="danger" disabled=${s} onClick=${()=>c({abort:!0},!1)}>Abort the run</button>
      </div>
    </div>`}
    <${N} error=${o} />
  </li>`}function $e({sessionId:t,items:e,onChange:n}){return!e||e.length===0?null:_`<section aria-labelledby="pending-h">
    <h2 id="pending-h">Awaiting a decision</h2>
    <ul class="plain">${e.map(s=>_`<${tn} key=${s.execution_key} sessionId=${t} item=${s} onDone=${n} />`)}</ul>
  </section>`}function ge({sessionId:t,status:e,onChange:n}){let[s,a]=$(!1),[o,r]=$(null),l=async p=>{a(!0),r(null);try{await S("POST",`/sessions/${W(t)}/${p}`,p==="resume"?{body:{}}:{}),n&&n()}catch(u){r(u)}finally{a(!1)}};return _`<div class="controls">
    <div class="buttons">
      <button data-testid="pause" class="secondary" disabled=${s||e!=="running"} onClick=${()=>l("pause")}>Pause</button>
      <button data-testid="resume" class="secondary" disabled=${s||e==="running"||e==="completed"||!e} onClick=${()=>l("resume")}>Resume</button>
      <button data-testid="cancel" class="danger" disabled=${s||!(e==="running"||e==="paused"||e==="awaiting_input")} onClick=${()=>l("cancel")}>Cancel</button>
    </div>
    <${N} error=${o} />
  </div>`}function nn(t,e){let s=(t.headers.get("Content-Disposition")||"").match(/filename="([^"]+)"/);return s?s[1]:`${e}.hx`}function Pt({runId:t}){let[e,n]=$(!1),[s,a]=$(!1),[o,r]=$(""),[l,d]=$(!1),[p,u]=$(null),[h,c]=$("");return _`<section class="export" aria-labelledby="export-h">
    <h2 id="export-h">Export as .hx</h2>
    <form onSubmit=${async f=>{f.preventDefault(),u(null),c("");let v={include_payloads:e,include_artifacts:s};if(o.trim())try{v.redact=JSON.parse(o)}catch(m){u({title:"Redaction rules are not JSON",detail:String(m.message||m)});return}d(!0);try{let m=await S("POST",`/runs/${W(t)}/export`,{body:v,raw:!0,headers:{Accept:"application/vnd.harnessx.incident+zip, application/problem+json"}}),b=await m.blob(),g=nn(m,t),w=URL.createObjectURL(b),y=document.createElement("a");y.href=w,y.download=g,document.body.appendChild(y),y.click(),y.remove(),setTimeout(()=>URL.revokeObjectURL(w),1e4),c(`${g} (${b.size} bytes)`)}catch(m){u(m)}finally{d(!1)}}}>
      <label class="check"><input type="checkbox" data-testid="export-payloads" checked=${e} onChange=${f=>n(f.target.checked)} /> Include payloads (redacted)</label>
      <label class="check"><input type="checkbox" data-testid="export-artifacts" checked=${s} onChange=${f=>a(f.target.checked)} /> Include artifacts (needs payloads)</label>
      <label for="redact">Redaction rules (JSON array, optional)</label>
      <textarea id="redact" rows="2" value=${o} onInput=${f=>r(f.target.value)}
        placeholder='[{"pattern": "acct-[0-9]+", "replace": "acct-…"}]'></textarea>
      <button data-testid="export" type="submit" disabled=${l}>Export</button>
      ${h?_`<span class="muted" role="status" data-testid="export-done">Saved ${h}</span>`:null}
    </form>
    <${N} error=${p} />
  </section>`}var Q=encodeURIComponent;function Le({sessionId:t}){let[e,n]=$(""),[s,a]=$(!0),[o,r]=$(!1),[l,d]=$(null),p=async h=>{if(h.preventDefault(),!!e.trim()){r(!0),d(null);try{let c=await S("POST",`/sessions/${Q(t)}/runs`,{body:{message:e,stream:s}});q(`/ui/runs/${Q(c.run_id)}`)}catch(c){d(c),r(!1)}}},u=`msg-${t}`;return _`<form class="start-run" data-testid="start-run" onSubmit=${p}>
    <label for=${u}>Message</label>
    <textarea id=${u} data-testid="run-message" rows="3" maxlength="1000000" value=${e}
      onInput=${h=>n(h.target.value)} placeholder="What should the agent do?"></textarea>
    <div class="row">
      <label class="check"><input type="checkbox" data-testid="run-stream" checked=${s} onChange=${h=>a(h.target.checked)} /> Stream the answer</label>
      <button type="submit" data-testid="start-run-submit" disabled=${o||!e.trim()}>Start run</button>
    </div>
    <${N} error=${l} />
  </form>`}function Et({id:t}){let[e,n]=$(null),[s,a]=$(null),[o,r]=$([""]),[l,d]=$([]),[p,u]=$(null),h=o.length-1,c=oe(async()=>{try{let[f,v,m]=await Promise.all([S("GET",`/sessions/${Q(t)}`),S("GET",`/sessions/${Q(t)}/runs`,{query:{limit:20,cursor:o[h]}}),S("GET",`/sessions/${Q(t)}/pending`)]);n(f),a(v),d(m.items||[]),u(null)}catch(f){u(f)}},[t,o]);if(I(()=>{c()},[c]),!e)return _`<section><h1>Session ${t}</h1>${p?_`<${N} error=${p} />`:_`<p class="muted">Loading…</p>`}</section>`;let i=e.latest_run;return _`<section class="session">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="/ui/" onClick=${E}>Sessions</a> › ${e.session_id}</nav>
    <h1>Session <code class="id">${e.session_id}</code></h1>
    <dl class="facts">
      <dt>Agent</dt><dd>${M(e.agent)}</dd>
      <dt>Created</dt><dd>${D(e.created_at)}</dd>
      <dt>Recording</dt><dd>${e.recording?"on":"off"}</dd>
      <dt>Latest run</dt><dd>${i?_`<a href=${"/ui/runs/"+Q(i.run_id)} onClick=${E}><${H} status=${i.status} /></a>`:_`<${H} />`}</dd>
      <dt>Metadata</dt><dd><${X} value=${e.metadata} /></dd>
    </dl>
    <${N} error=${p} />
    <${$e} sessionId=${t} items=${l} onChange=${c} />
    ${i?_`<${ge} sessionId=${t} status=${i.status} onChange=${c} />`:null}
    <section aria-labelledby="runs-h">
      <h2 id="runs-h">Runs</h2>
      <div class="table-wrap"><table data-testid="runs-table">
        <thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Output</th></tr></thead>
        <tbody>
          ${s&&s.items.length===0?_`<tr><td colspan="4" class="muted">No runs yet.</td></tr>`:null}
          ${(s?s.items:[]).map(f=>_`<tr data-testid="run-row" data-run-id=${f.run_id}>
            <td><a href=${"/ui/runs/"+Q(f.run_id)} onClick=${E}><code>${f.run_id}</code></a></td>
            <td><${H} status=${f.status} /></td>
            <td>${D(f.created_at)}</td>
            <td class="clip">${f.output||""}</td>
          </tr>`)}
        </tbody>
      </table></div>
      <div class="pager">
        <button class="secondary" disabled=${h===0} onClick=${()=>r(o.slice(0,-1))}>Previous</button>
        <button class="secondary" disabled=${!s||!s.next_cursor} onClick=${()=>r([...o,s.next_cursor])}>Next</button>
      </div>
    </section>
    <section aria-labelledby="mcp-h">
      <h2 id="mcp-h">Pinned MCP tools</h2>
      ${e.mcp_tools.length===0?_`<p class="muted">None (the agent has no MCP servers).</p>`:_`<ul class="plain">
        ${e.mcp_tools.map(f=>_`<li><code>${f.name}</code> <span class="muted">${f.server} · ${f.transport}</span> — ${f.description}</li>`)}
      </ul>`}
    </section>
    <section class="card" aria-labelledby="start-h">
      <h2 id="start-h">Start a run</h2>
      <${Le} sessionId=${t} />
    </section>
  </section>`}var sn=20;function on(){let t=new URLSearchParams(location.search);return{status:t.get("status")||"",agent:t.get("agent")||""}}function rn(t){let e=new URLSearchParams;t.status&&e.set("status",t.status),t.agent&&e.set("agent",t.agent);let n=e.toString();q("/ui/"+(n?"?"+n:""),{replace:!0})}function an(){let[t,e]=$([]);return I(()=>{S("GET","/agents").then(n=>e(n.items||[]),()=>e([]))},[]),t}function ln({agents:t,onCreated:e}){let[n,s]=$(""),[a,o]=$(""),[r,l]=$(!0),[d,p]=$(!1),[u,h]=$(null);return _`<form class="card new-session" data-testid="new-session" onSubmit=${async i=>{i.preventDefault();let f=t.find(v=>M(v)===(n||M(t[0])));if(f){p(!0),h(null);try{let v={agent:{name:f.name,version:f.version},recording:r};a.trim()&&(v.session_id=a.trim());let m=await S("POST","/sessions",{body:v});o(""),e(m)}catch(v){h(v)}finally{p(!1)}}}} aria-labelledby="new-h">
    <h2 id="new-h">New session</h2>
    <div class="row">
      <label>Agent
        <select data-testid="new-session-agent" value=${n||M(t[0])} onChange=${i=>s(i.target.value)}>
          ${t.map(i=>_`<option value=${M(i)}>${M(i)}</option>`)}
        </select>
      </label>
      <label>Session id (optional)
        <input data-testid="new-session-id" value=${a} maxlength="200" onInput=${i=>o(i.target.value)} placeholder="generated" />
      </label>
      <label class="check"><input type="checkbox" checked=${r} onChange=${i=>l(i.target.checked)} /> Record (flight recorder)</label>
      <button type="submit" data-testid="new-session-submit" disabled=${d||t.length===0}>Create session</button>
    </div>
    <${N} error=${u} />
  </form>`}function Nt(){let t=an(),[e,n]=$(on),[s,a]=$([""]),[o,r]=$(null),[l,d]=$(null),[p,u]=$(null),[h,c]=$(0),i=s.length-1;I(()=>{let m=new AbortController;return d(null),S("GET","/sessions",{query:{limit:sn,cursor:s[i],status:e.status,agent:e.agent},signal:m.signal}).then(r,b=>{b.name!=="AbortError"&&(d(b),r({items:[],next_cursor:null}))}),()=>m.abort()},[e,s,h]);let f=m=>b=>{let g={...e,[m]:b.target.value};n(g),a([""]),rn(g)},v=[...new Set(t.map(m=>m.name))];return _`<section class="sessions">
    <h1>Sessions</h1>
    <${ln} agents=${t} onCreated=${m=>{u(m),c(b=>b+1)}} />
    ${p?_`<div class="card" aria-labelledby="start-h">
      <h2 id="start-h">Start a run in <a href=${"/ui/sessions/"+encodeURIComponent(p.session_id)} onClick=${E}>${p.session_id}</a></h2>
      <${Le} sessionId=${p.session_id} />
    </div>`:null}
    <form class="filters" role="search" aria-label="Filter sessions" onSubmit=${m=>m.preventDefault()}>
      <label>Status
        <select data-testid="filter-status" value=${e.status} onChange=${f("status")}>
          <option value="">any</option>
          ${wt.map(m=>_`<option value=${m}>${m}</option>`)}
          <option value="none">no run yet</option>
        </select>
      </label>
      <label>Agent
        <select data-testid="filter-agent" value=${e.agent} onChange=${f("agent")}>
          <option value="">any</option>
          ${v.map(m=>_`<option value=${m}>${m} (all versions)</option>`)}
          ${t.map(m=>_`<option value=${M(m)}>${M(m)}</option>`)}
        </select>
      </label>
    </form>
    <${N} error=${l} />
    <div class="table-wrap">
      <table data-testid="sessions-table">
        <caption class="sr-only">Your sessions</caption>
        <thead><tr><th scope="col">Session</th><th scope="col">Agent</th><th scope="col">Latest run</th><th scope="col">Created</th></tr></thead>
        <tbody>
          ${o&&o.items.length===0?_`<tr><td colspan="4" class="muted">No sessions${e.status||e.agent?" match these filters":""}.</td></tr>`:null}
          ${(o?o.items:[]).map(m=>_`<tr data-testid="session-row" data-session-id=${m.session_id}>
            <td><a href=${"/ui/sessions/"+encodeURIComponent(m.session_id)} onClick=${E}>${m.session_id}</a></td>
            <td>${M(m.agent)}</td>
            <td>${m.latest_run?_`<a href=${"/ui/runs/"+encodeURIComponent(m.latest_run.run_id)} onClick=${E}><${H} status=${m.latest_run.status} /></a>`:_`<${H} />`}</td>
            <td>${D(m.created_at)}</td>
          </tr>`)}
        </tbody>
      </table>
    </div>
    <div class="pager">
      <button class="secondary" data-testid="prev-page" disabled=${i===0} onClick=${()=>a(s.slice(0,-1))}>Previous</button>
      <span class="muted">Page ${i+1}</span>
      <button class="secondary" data-testid="next-page" disabled=${!o||!o.next_cursor}
        onClick=${()=>a([...s,o.next_cursor])}>Next</button>
    </div>
  </section>`}var Y=encodeURIComponent,cn=new Set(["run_result","approval_required","recovery_required","attempt_reset","waiting","tool_call_start","tool_result","turn_complete","text_complete","error"]);async function un(t,e){let n=[],s="0";for(let a=0;a<1e3;a++){let o=await S("GET",`/runs/${Y(t)}/events`,{query:{after:s,limit:1e3},signal:e});if(n.push(...o.events||[]),!o.events||o.events.length===0||o.next_cursor===s)break;s=o.next_cursor}return n}function dn(t,e){let n=t.data;return!n||typeof n!="object"?!1:e.call_id&&(n.id===e.call_id||n.tool_call_id===e.call_id||n.call&&n.call.id===e.call_id)?!0:!!(e.execution_key&&n.execution_key===e.execution_key)}function _n(t,e,n){if(e.kind==="tool")return t.filter(d=>d.step_id===e.step_id&&dn(d,e));let s=n.filter(d=>d.kind==="model"&&d.step_id===e.step_id).map(d=>Date.parse(d.started_at)).sort((d,p)=>d-p),a=Date.parse(e.started_at),o=s.indexOf(a),r=o<=0?-1/0:a,l=o>=0&&o+1<s.length?s[o+1]:1/0;return t.filter(d=>{if(d.step_id!==e.step_id)return!1;let p=Date.parse(d.created_at);return Number.isNaN(p)?d.attempt_id===String(e.attempt):p>=r&&p<l})}function pn({runId:t,attempt:e,attempts:n,version:s}){let[a,o]=$(null),[r,l]=$(null);I(()=>{let p=new AbortController;return l(null),un(t,p.signal).then(o,u=>{u.name!=="AbortError"&&l(u)}),()=>p.abort()},[t,s]);let d=a?_n(a,e,n):[];return _`<section class="bar-detail card" data-testid="bar-detail" aria-live="polite" aria-labelledby="detail-h">
    <h2 id="detail-h">${e.kind==="model"?"Model":`Tool ${e.tool||""}`} · step ${e.step_id} · attempt ${e.attempt}</h2>
    <dl class="facts">
      <dt>Outcome</dt><dd>${e.outcome}</dd>
      <dt>Started</dt><dd>${D(e.started_at)}</dd>
      <dt>Ended</dt><dd>${e.ended_at?D(e.ended_at):"—"}</dd>
      ${e.error?_`<dt>Error</dt><dd>${e.error.type}: ${e.error.message}</dd>`:null}
      ${e.retry_wait_seconds?_`<dt>Retry wait</dt><dd>${e.retry_wait_seconds} s</dd>`:null}
      ${e.model?_`<dt>Model</dt><dd>${e.model}${e.provider?` (${e.provider})`:""}</dd>`:null}
      ${e.execution_key?_`<dt>Execution key</dt><dd><code>${e.execution_key}</code></dd>`:null}
      ${e.replay_policy?_`<dt>Replay policy</dt><dd>${e.replay_policy}</dd>`:null}
      ${e.approval?_`<dt>Approval</dt><dd>requested ${D(e.approval.requested_at)}${e.approval.decided_at?_`, ${e.approval.approved?"approved":"declined"} ${D(e.approval.decided_at)}`:", awaited"}</dd>`:null}
    </dl>
    <${N} error=${r} />
    ${a===null&&!r?_`<p class="muted">Loading events…</p>`:null}
    ${a!==null&&d.length===0?_`<p class="muted">No events of this attempt.</p>`:null}
    <ol class="events">
      ${d.map(p=>_`<li class="event" data-testid="event" data-type=${p.type}>
        <div><strong>${p.type}</strong> <span class="muted">#${p.cursor} · ${D(p.created_at)}</span></div>
        <${X} value=${p.data} />
      </li>`)}
    </ol>
  </section>`}function fn({usage:t,incomplete:e}){return t?_`<span>${t.input_tokens} in / ${t.output_tokens} out tokens${t.cache_read_input_tokens?`, ${t.cache_read_input_tokens} cache read`:""}${e?" (incomplete)":""}</span>`:null}function Rt({id:t}){let[e,n]=$(null),[s,a]=$(null),[o,r]=$([]),[l,d]=$(null),[p,u]=$(null),[h,c]=$(null),[i,f]=$(""),[v,m]=$(0),b=fe(""),g=fe(""),w=fe(0),y=oe(async()=>{try{let R=await S("GET",`/runs/${Y(t)}`);n(R),d(null);let[P,U]=await Promise.allSettled([S("GET",`/runs/${Y(t)}/timeline`),S("GET",`/sessions/${Y(R.session_id)}/pending`)]);P.status==="fulfilled"?(a(P.value),u(null)):u(P.reason),r(U.status==="fulfilled"?U.value.items||[]:[]),m(O=>O+1)}catch(R){d(R)}},[t]),V=oe(()=>{clearTimeout(w.current),w.current=setTimeout(y,250)},[y]);I(()=>(y(),()=>clearTimeout(w.current)),[y]);let G=!!e&&!Me(e.status);if(I(()=>{if(!G)return;let R=new AbortController,P=!1;return(async()=>{let U=500;for(;!P;){let O=!1;try{for await(let k of kt(t,{lastEventId:b.current,signal:R.signal}))U=500,k.cursor&&(b.current=k.cursor),k.type==="text_delta"?(g.current!==k.step_id&&(g.current=k.step_id,f("")),f(Ot=>Ot+(typeof k.data=="string"?k.data:""))):k.type==="attempt_reset"&&k.step_id===g.current&&f(""),cn.has(k.type)&&V();O=!0}catch(k){if(P||k.name==="AbortError")return;if(k.status&&k.status<500&&k.status!==408&&k.status!==429){d(k);return}}if(P)return;if(O){V();let k=await S("GET",`/runs/${Y(t)}`,{signal:R.signal}).catch(()=>null);if(P||!k||Me(k.status))return}await new Promise(k=>setTimeout(k,U)),U=Math.min(U*2,1e4)}})(),()=>{P=!0,R.abort()}},[t,G,V]),l&&!e)return _`<section><h1>Run</h1><${N} error=${l} /></section>`;if(!e)return _`<section><h1>Run</h1><p class="muted">Loading…</p></section>`;let J=s?s.attempts||[]:[],L=h?J.find(R=>he(R)===h):null;return _`<section class="run">
    <nav class="crumbs" aria-label="Breadcrumb"><a href="/ui/" onClick=${E}>Sessions</a> ›
      <a href=${"/ui/sessions/"+Y(e.session_id)} onClick=${E}>${e.session_id}</a> › run</nav>
    <h1>Run <code class="id">${e.run_id}</code></h1>
    <dl class="facts">
      <dt>Status</dt><dd><${H} status=${e.status} testid="run-status" /></dd>
      <dt>Created</dt><dd>${D(e.created_at)}</dd>
      <dt>Updated</dt><dd>${D(e.updated_at)}</dd>
      <dt>Usage</dt><dd><${fn} usage=${e.usage} incomplete=${e.usage_incomplete} /></dd>
      ${e.stop_reason?_`<dt>Stop reason</dt><dd>${e.stop_reason}</dd>`:null}
    </dl>
    <${N} error=${l} />
    ${e.error?_`<div class="run-error" role="status"><strong>Error</strong> <${X} value=${e.error} /></div>`:null}
    ${G||i?_`<section aria-labelledby="live-h"><h2 id="live-h">${G?"Live":"Last streamed text"}</h2>
      <p class="live-text" data-testid="live-text" aria-live="polite">${i}</p></section>`:null}
    ${e.output!==null&&e.output!==void 0?_`<section aria-labelledby="out-h"><h2 id="out-h">Result</h2>
      <p class="output" data-testid="run-output">${e.output}</p></section>`:null}
    <${$e} sessionId=${e.session_id} items=${o} onChange=${y} />
    <${ge} sessionId=${e.session_id} status=${e.status} onChange=${y} />
    <section aria-labelledby="tl-h">
      <h2 id="tl-h">Timeline</h2>
      ${p?_`<${N} error=${p} />`:null}
      <${Ct} timeline=${s} selected=${h} onSelect=${R=>c(he(R))} />
    </section>
    ${L?_`<${pn} runId=${t} attempt=${L} attempts=${J} version=${v} />`:null}
    <${Pt} runId=${t} />
  </section>`}function Ut(){return _`<section><h1>Bundles</h1><p>The bundle inspector is not built yet.</p></section>`}function mn(t){try{let e=t.split(".")[1].replace(/-/g,"+").replace(/_/g,"/"),n=JSON.parse(atob(e+"===".slice((e.length+3)%4)));return n.name||n.preferred_username||n.sub||"signed in"}catch{return"signed in"}}function hn({path:t}){let e=me();if(e){let n=()=>{Oe(""),q("/ui/sign-in")};return _`<div class="account"><span data-testid="signed-in-as">${mn(e)}</span>
      <button class="link" data-testid="sign-out" onClick=${n}>Sign out</button></div>`}return ft().oidc?_`<div class="account"><button data-testid="sign-in" onClick=${()=>Ae(t)}>Sign in</button></div>`:null}function $n(){let[t,e]=$("");return I(()=>{ht().then(n=>q(n||"/ui/",{replace:!0}),n=>e(String(n.message||n)))},[]),t?_`<p class="problem" role="alert" data-testid="problem">${t}</p>`:_`<p>Signing in…</p>`}function gn({route:t}){switch(t.name){case"sessions":return _`<${Nt} />`;case"session":return _`<${Et} key=${t.params.id} id=${t.params.id} />`;case"run":return _`<${Rt} key=${t.params.id} id=${t.params.id} />`;case"bundles":return _`<${Ut} />`;case"callback":return _`<${$n} />`;case"sign-in":return _`<${$t} />`;default:return _`<section><h1>Not found</h1><p>No console page here. <a href="/ui/" onClick=${E}>Sessions</a></p></section>`}}function vn(){let t=gt(),e=vt(t),n=s=>e.name===s||s==="sessions"&&(e.name==="session"||e.name==="run")?"page":void 0;return _`<div class="layout">
    <header class="top">
      <a class="brand" href="/ui/" onClick=${E}>hxd</a>
      <nav aria-label="Main">
        <a href="/ui/" onClick=${E} aria-current=${n("sessions")}>Sessions</a>
        <a href="/ui/bundles" onClick=${E} aria-current=${n("bundles")}>Bundles</a>
      </nav>
      <${hn} path=${t} />
    </header>
    <main id="main"><${gn} route=${e} /></main>
  </div>`}Qe(_`<${vn} />`,document.getElementById("app"));
